"""A connected engine: the client, the verbs it offers, and how one is found."""

from __future__ import annotations

from typing import Any

import docker

from reprobox.engine._containers import ContainerVerbs
from reprobox.engine._errors import EngineUnavailable
from reprobox.engine._images import ImageVerbs
from reprobox.engine._translate import translated

CONNECT_TIMEOUT = 10


class Engine(ImageVerbs, ContainerVerbs):
    """A connected Docker engine."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def engine_version(self) -> str:
        with translated("asking the Docker engine for its version failed"):
            version = self.client.version()
        return str(version.get("Version", "unknown"))


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
