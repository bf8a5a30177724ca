"""The engine's container verbs: create, start, logs, wait, stop, kill, inspect, remove, list."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Generator, Mapping, Sequence
from typing import Any

import docker.errors

from reprobox.engine._errors import ContainerFailed, EngineError, GpuUnavailable, ImageMissing
from reprobox.engine._images import label_filters
from reprobox.engine._translate import object_absent, status_in, translated

GPU_UNAVAILABLE = "could not select device driver"  # the engine's words when it has no GPU runtime


class ContainerVerbs:
    """Container verbs of `Engine`; every SDK call goes through `translated`."""

    client: Any

    def create_container(self, settings: Mapping[str, Any]) -> str:
        """Create (not start) a container from `containers.create` keyword arguments; returns its id."""
        missing = functools.partial(ImageMissing, str(settings.get("image")), fix="build or load it first")
        with translated("creating the container failed", error=_container_failure, missing=missing):
            container = self.client.containers.create(**settings)
        return str(container.id)

    def start(self, container_id: str) -> None:
        with translated(f"starting container {container_id[:12]} failed", error=_container_failure):
            self.client.api.start(container_id)

    def stream_logs(self, container_id: str) -> Generator[bytes, None, None]:
        """The container's combined stdout/stderr from its start, as it arrives, until it exits.

        Closing the generator closes the connection (the SDK's stream is cancellable).
        """
        reading = f"reading the output of container {container_id[:12]} failed"
        with translated(reading, error=ContainerFailed):
            stream = self.client.api.logs(container_id, stdout=True, stderr=True, stream=True, follow=True)
        try:
            with translated(reading, error=ContainerFailed):
                yield from stream
        finally:
            _close_stream(stream)

    def output(self, container_id: str, *, stdout: bool = True, stderr: bool = False) -> bytes:
        """Everything the (stopped) container wrote to the chosen streams."""
        with translated(f"reading the output of container {container_id[:12]} failed", error=ContainerFailed):
            data = self.client.api.logs(container_id, stdout=stdout, stderr=stderr, stream=False)
        return bytes(data)

    def wait(self, container_id: str, timeout: float | None = None) -> int:
        """The container's exit status once it has stopped (-1 when the engine reports none)."""
        with translated(f"waiting for container {container_id[:12]} failed", error=ContainerFailed):
            result = self.client.api.wait(container_id, timeout=timeout)
        return int(result.get("StatusCode", -1))

    def stop(self, container_id: str, grace: float) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; a container that already stopped is fine."""
        stopping = f"stopping container {container_id[:12]} failed"
        with translated(stopping, error=ContainerFailed, tolerate=object_absent):
            self.client.api.stop(container_id, timeout=max(0, round(grace)))

    def kill(self, container_id: str) -> None:
        killing = f"killing container {container_id[:12]} failed"
        with translated(killing, error=ContainerFailed, tolerate=_gone_or_not_running):
            self.client.api.kill(container_id)

    def inspect_container(self, container_id: str) -> dict[str, Any]:
        with translated(f"inspecting container {container_id[:12]} failed", error=ContainerFailed):
            data: dict[str, Any] = self.client.api.inspect_container(container_id)
        return data

    def remove_container(self, container_id: str) -> None:
        """Remove the container and its anonymous volumes, running or not; a missing one is fine."""
        removing = f"removing container {container_id[:12]} failed"
        with translated(removing, error=ContainerFailed, tolerate=_gone_or_going):
            self.client.api.remove_container(container_id, v=True, force=True)

    def list_containers(self, labels: Mapping[str, str] | Sequence[str]) -> list[str]:
        """Ids of all containers, running or not, carrying every given label."""
        with translated("listing containers failed"):
            found = self.client.api.containers(all=True, filters={"label": label_filters(labels)})
        return [str(item["Id"]) for item in found]


def _container_failure(action: str, reason: str) -> EngineError:
    """A container that cannot be created or started, told apart when it is for want of GPUs."""
    if GPU_UNAVAILABLE in reason:
        return GpuUnavailable(reason)
    return ContainerFailed(action, reason)


def _gone_or_not_running(exc: Exception) -> bool:
    """Nothing left to kill: the container is gone (404) or not running (409)."""
    return status_in(exc, 404, 409)


def _gone_or_going(exc: Exception) -> bool:
    """Nothing left to remove: the container is gone, or the engine is already removing it."""
    return object_absent(exc) or (status_in(exc, 409) and "already in progress" in str(exc))


def _close_stream(stream: Any) -> None:
    """Shut the socket (the SDK's cancel) and close the HTTP response that still holds it."""
    with contextlib.suppress(OSError, docker.errors.DockerException):
        stream.close()
    response = getattr(stream, "_response", None)
    if response is not None:
        with contextlib.suppress(OSError):
            response.close()
