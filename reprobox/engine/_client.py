"""A connected engine: the client, the verbs it offers, and how one is found."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import docker

from reprobox.engine._containers import ContainerVerbs
from reprobox.engine._errors import EngineUnavailable
from reprobox.engine._images import ImageVerbs
from reprobox.engine._translate import translated

CONNECT_TIMEOUT = 10
LOCAL_SOCKET_URL = "http+docker://localhost"  # docker-py's base URL for a unix socket on this machine


class Engine(ImageVerbs, ContainerVerbs):
    """A connected Docker engine."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def engine_version(self) -> str:
        with translated("asking the Docker engine for its version failed"):
            version = self.client.version()
        return str(version.get("Version", "unknown"))

    def image_storage(self) -> tuple[Path, int] | None:
        """Where the engine keeps its images and the bytes free there; None for an engine reached over
        the network or one in a VM (its paths are not this machine's), or one that does not say."""
        if self.client.api.base_url != LOCAL_SOCKET_URL:
            return None
        with translated("asking the engine where it keeps its images failed"):
            root = self.client.info().get("DockerRootDir")
        if not isinstance(root, str) or not root:
            return None
        try:
            disk = os.statvfs(root)  # the folder itself: a parent of a path that is not here is another disk
        except OSError:
            return None
        # What df calls available: blocks reserved for root are left out, as filesystems may keep them
        # from root too (ext4's resuid), and a floor is only meant to refuse a build that cannot finish.
        return Path(root), disk.f_bavail * disk.f_frsize


def connect(*, timeout: float = CONNECT_TIMEOUT, base_url: str | None = None) -> Engine:
    """The engine at `base_url` (Podman's socket), else the one DOCKER_HOST or the default socket names;
    EngineUnavailable when none answers."""
    with translated(None):
        if base_url is None:
            client = docker.from_env(timeout=int(timeout))
        else:
            client = docker.DockerClient(base_url=base_url, timeout=int(timeout))
        client.ping()
    # Long operations (build, wait, log streams) must not hit the short connect timeout.
    client.api.timeout = None
    return Engine(client)


def engine_available() -> bool:
    """True when a Docker engine answers; never raises."""
    try:
        connect(timeout=3).client.close()
    except EngineUnavailable:
        return False
    return True
