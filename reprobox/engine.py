"""The Docker engine seam: the only module that imports the docker SDK.

Small verbs over one client (build, inspect, create, start, logs, wait, stop, remove); every SDK or
connection error leaves here as an EnvironmentProblem that says what to do. Callers pass plain data
(dicts of create arguments, tar bytes) and get plain data back, so nothing else needs the SDK.
"""

from __future__ import annotations

import collections
import contextlib
import io
import re
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import docker
import docker.errors
import requests.exceptions

from reprobox.errors import EnvironmentProblem

START_ENGINE_HINT = "start one with: sudo scripts/start-docker.sh"
OFFLINE_BASE_HINT = (
    "build the offline base with scripts/build-offline-base.sh and pass --base-image / REPROBOX_BASE_IMAGE"
)
GPU_UNAVAILABLE = "could not select device driver"  # the engine's words when it has no GPU runtime
LOG_TAIL_LINES = 20
CONNECT_TIMEOUT = 10
_STEP = re.compile(r"^Step \d+/\d+ : ")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ImageInfo:
    """What the manifest records about an image."""

    id: str
    repo_digests: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    user: str = ""  # the image's configured user (Config.User), "" for root
    tags: tuple[str, ...] = ()

    @property
    def repo_digest(self) -> str | None:
        return self.repo_digests[0] if self.repo_digests else None

    def reference(self) -> str:
        """The most specific name to run: the id."""
        return self.id


class Engine:
    """A connected Docker engine."""

    def __init__(self, client: Any) -> None:
        self.client = client

    # -- engine ----------------------------------------------------------------------------------

    def engine_version(self) -> str:
        try:
            return str(self.client.version().get("Version", "unknown"))
        except _ENGINE_ERRORS as exc:
            raise _problem("asking the Docker engine for its version failed", exc) from exc

    # -- images ----------------------------------------------------------------------------------

    def image_exists(self, ref: str) -> bool:
        try:
            self.client.api.inspect_image(ref)
        except docker.errors.ImageNotFound:
            return False
        except docker.errors.APIError as exc:
            if exc.status_code in (400, 404):  # an invalid reference cannot exist
                return False
            raise _problem(f"inspecting image {ref} failed", exc) from exc
        except _ENGINE_ERRORS as exc:
            raise _problem(f"inspecting image {ref} failed", exc) from exc
        return True

    def inspect_image(self, ref: str) -> ImageInfo:
        try:
            data = self.client.api.inspect_image(ref)
        except docker.errors.ImageNotFound as exc:
            raise EnvironmentProblem(
                f"image {ref} is not present on this Docker engine; build it, or pull or load it first"
            ) from exc
        except _ENGINE_ERRORS as exc:
            raise _problem(f"inspecting image {ref} failed", exc) from exc
        return _image_info(data)

    def list_images(self, labels: Mapping[str, str] | Sequence[str]) -> list[ImageInfo]:
        """Images carrying every given label (`{"k": "v"}` or `["k", "k=v"]`)."""
        try:
            found = self.client.api.images(filters={"label": _label_filters(labels)})
        except _ENGINE_ERRORS as exc:
            raise _problem("listing images failed", exc) from exc
        return [self.inspect_image(item["Id"]) for item in found]

    def pull(self, ref: str, progress: Progress) -> ImageInfo:
        try:
            for event in self.client.api.pull(ref, stream=True, decode=True):
                if event.get("error"):
                    raise EnvironmentProblem(
                        f"pulling {ref} failed: {event['error']}; pull or load it by hand"
                    )
                if event.get("status") and not event.get("progressDetail"):
                    progress(f"{event.get('id', ref)}: {event['status']}")
        except _ENGINE_ERRORS as exc:
            raise _problem(
                f"image {ref} is not present and pulling it failed", exc, hint="pull or load it"
            ) from exc
        return self.inspect_image(ref)

    def remove_image(self, ref: str, *, force: bool = False) -> None:
        try:
            self.client.api.remove_image(ref, force=force)
        except docker.errors.ImageNotFound:
            return
        except _ENGINE_ERRORS as exc:
            raise _problem(f"removing image {ref} failed", exc) from exc

    def build(
        self,
        context: bytes | IO[bytes],
        tag: str,
        buildargs: Mapping[str, str],
        labels: Mapping[str, str],
        progress: Progress,
        *,
        base_image: str | None = None,
        network: bool = True,
    ) -> ImageInfo:
        """Build from a tar context, streaming each line to `progress` as it arrives.

        `network=False` runs every build step without a network, which proves an offline build.
        """
        fileobj = _as_file(context)
        tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
        step = "the start"
        try:
            stream = self.client.api.build(
                fileobj=fileobj,
                custom_context=True,
                tag=tag,
                buildargs=dict(buildargs),
                labels=dict(labels),
                decode=True,
                rm=True,
                forcerm=True,
                pull=False,
                network_mode=None if network else "none",
            )
            failure: str | None = None
            for event in stream:  # read to the end even after an error, so the connection is released
                for line in _event_lines(event):
                    tail.append(line)
                    if _STEP.match(line) and failure is None:
                        step = line
                    progress(line)
                if failure is None and ("error" in event or "errorDetail" in event):
                    detail = event.get("errorDetail", {}).get("message") or event.get("error")
                    failure = str(detail or "unknown error")
                    tail.append(f"error: {failure}")
        except docker.errors.APIError as exc:
            raise self._build_failure(tag, step, _reason(exc), tail, base_image) from exc
        except _ENGINE_ERRORS as exc:
            raise _problem(f"building image {tag} failed", exc) from exc
        if failure is not None:
            raise self._build_failure(tag, step, failure, tail, base_image)
        return self.inspect_image(tag)

    def _build_failure(
        self, tag: str, step: str, detail: str, tail: Sequence[str], base_image: str | None
    ) -> EnvironmentProblem:
        log_tail = "\n".join(tail)
        if base_image and not self.image_exists(base_image):
            return EnvironmentProblem(
                f"base image {base_image} is not present and cannot be pulled here; {OFFLINE_BASE_HINT}",
                log_tail=log_tail,
            )
        return EnvironmentProblem(
            f"building image {tag} failed at {step.strip()!r}: {detail.strip()}; see the build log above",
            log_tail=log_tail,
        )

    # -- containers ------------------------------------------------------------------------------

    def create_container(self, settings: Mapping[str, Any]) -> str:
        """Create (not start) a container from `containers.create` keyword arguments; returns its id."""
        try:
            container = self.client.containers.create(**settings)
        except docker.errors.ImageNotFound as exc:
            raise EnvironmentProblem(
                f"image {settings.get('image')} is not present on this Docker engine; build or load it first"
            ) from exc
        except _ENGINE_ERRORS as exc:
            raise _problem("creating the container failed", exc) from exc
        return str(container.id)

    def start(self, container_id: str) -> None:
        try:
            self.client.api.start(container_id)
        except _ENGINE_ERRORS as exc:
            if GPU_UNAVAILABLE in _reason(exc):
                raise EnvironmentProblem(
                    f"the job asks for GPUs but this Docker engine cannot provide them ({_reason(exc)}); "
                    "install the NVIDIA Container Toolkit, or remove resources.gpus from the job"
                ) from exc
            raise _problem(f"starting container {container_id[:12]} failed", exc) from exc

    def stream_logs(self, container_id: str) -> Generator[bytes, None, None]:
        """The container's combined stdout/stderr from its start, as it arrives, until it exits.

        Closing the generator closes the connection (the SDK's stream is cancellable).
        """
        try:
            stream = self.client.api.logs(container_id, stdout=True, stderr=True, stream=True, follow=True)
        except _ENGINE_ERRORS as exc:
            raise _problem(f"reading the output of container {container_id[:12]} failed", exc) from exc
        try:
            yield from stream
        except _ENGINE_ERRORS as exc:
            raise _problem(f"reading the output of container {container_id[:12]} failed", exc) from exc
        finally:
            _close_stream(stream)

    def output(self, container_id: str, *, stdout: bool = True, stderr: bool = False) -> bytes:
        """Everything the (stopped) container wrote to the chosen streams."""
        try:
            return bytes(self.client.api.logs(container_id, stdout=stdout, stderr=stderr, stream=False))
        except _ENGINE_ERRORS as exc:
            raise _problem(f"reading the output of container {container_id[:12]} failed", exc) from exc

    def wait(self, container_id: str, timeout: float | None = None) -> int:
        """The container's exit status once it has stopped (-1 when the engine reports none)."""
        try:
            result = self.client.api.wait(container_id, timeout=timeout)
        except _ENGINE_ERRORS as exc:
            raise _problem(f"waiting for container {container_id[:12]} failed", exc) from exc
        return int(result.get("StatusCode", -1))

    def stop(self, container_id: str, grace: float) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; a container that already stopped is fine."""
        try:
            self.client.api.stop(container_id, timeout=max(0, round(grace)))
        except docker.errors.NotFound:
            return
        except _ENGINE_ERRORS as exc:
            raise _problem(f"stopping container {container_id[:12]} failed", exc) from exc

    def kill(self, container_id: str) -> None:
        try:
            self.client.api.kill(container_id)
        except docker.errors.APIError as exc:
            if exc.status_code in (404, 409):  # gone or not running: nothing left to kill
                return
            raise _problem(f"killing container {container_id[:12]} failed", exc) from exc
        except _ENGINE_ERRORS as exc:
            raise _problem(f"killing container {container_id[:12]} failed", exc) from exc

    def inspect_container(self, container_id: str) -> dict[str, Any]:
        try:
            data: dict[str, Any] = self.client.api.inspect_container(container_id)
        except _ENGINE_ERRORS as exc:
            raise _problem(f"inspecting container {container_id[:12]} failed", exc) from exc
        return data

    def remove_container(self, container_id: str) -> None:
        """Remove the container and its anonymous volumes, running or not; a missing one is fine."""
        try:
            self.client.api.remove_container(container_id, v=True, force=True)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            if exc.status_code == 409 and "already in progress" in str(exc):
                return
            raise _problem(f"removing container {container_id[:12]} failed", exc) from exc
        except _ENGINE_ERRORS as exc:
            raise _problem(f"removing container {container_id[:12]} failed", exc) from exc

    def list_containers(self, labels: Mapping[str, str] | Sequence[str]) -> list[str]:
        """Ids of all containers, running or not, carrying every given label."""
        try:
            found = self.client.api.containers(all=True, filters={"label": _label_filters(labels)})
        except _ENGINE_ERRORS as exc:
            raise _problem("listing containers failed", exc) from exc
        return [str(item["Id"]) for item in found]


_ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


def connect(*, timeout: float = CONNECT_TIMEOUT, base_url: str | None = None) -> Engine:
    """The engine at `base_url` (default: DOCKER_HOST, else the default socket); EnvironmentProblem when
    none answers."""
    try:
        if base_url is None:
            client = docker.from_env(timeout=int(timeout))
        else:
            client = docker.DockerClient(base_url=base_url, timeout=int(timeout))
        client.ping()
    except _ENGINE_ERRORS as exc:
        raise EnvironmentProblem(
            f"no Docker engine answers ({_reason(exc)}); {START_ENGINE_HINT}",
            hint="or run with --runtime local to run without isolation",
        ) from exc
    # Long operations (build, wait, log streams) must not hit the short connect timeout.
    client.api.timeout = None
    return Engine(client)


def engine_available() -> bool:
    """True when a Docker engine answers; never raises."""
    try:
        connect(timeout=3).client.close()
    except EnvironmentProblem:
        return False
    return True


def _image_info(data: Mapping[str, Any]) -> ImageInfo:
    config = data.get("Config") or {}
    return ImageInfo(
        id=str(data["Id"]),
        repo_digests=tuple(data.get("RepoDigests") or ()),
        labels=dict(config.get("Labels") or {}),
        user=str(config.get("User") or ""),
        tags=tuple(data.get("RepoTags") or ()),
    )


def _label_filters(labels: Mapping[str, str] | Sequence[str]) -> list[str]:
    if isinstance(labels, Mapping):
        return [f"{key}={value}" for key, value in labels.items()]
    return list(labels)


def _event_lines(event: Mapping[str, Any]) -> list[str]:
    """Readable lines of one build event (step output, pull status)."""
    if "stream" in event:
        return [line.rstrip() for line in str(event["stream"]).splitlines() if line.strip()]
    if "status" in event and not event.get("progressDetail"):
        return [f"{event.get('id', '')}: {event['status']}".lstrip(": ")]
    return []


def _close_stream(stream: Any) -> None:
    """Shut the socket (the SDK's cancel) and close the HTTP response that still holds it."""
    with contextlib.suppress(OSError, docker.errors.DockerException):
        stream.close()
    response = getattr(stream, "_response", None)
    if response is not None:
        with contextlib.suppress(OSError):
            response.close()


def _as_file(context: bytes | IO[bytes]) -> IO[bytes]:
    if isinstance(context, bytes | bytearray):
        return io.BytesIO(context)
    return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, docker.errors.APIError):
        return str(exc.explanation or exc)
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0] if text else type(exc).__name__


def _problem(what: str, exc: BaseException, *, hint: str | None = None) -> EnvironmentProblem:
    connection_lost = isinstance(exc, requests.exceptions.ConnectionError | ConnectionError)
    suffix = START_ENGINE_HINT if connection_lost else (hint or "check the Docker engine (docker info)")
    return EnvironmentProblem(f"{what} ({_reason(exc)}); {suffix}")


# -- image archives (docker save / docker load), for air-gapped bundles ----------------------------

_LOADED_ID = re.compile(r"Loaded image ID:\s*(\S+)")
_LOADED_TAG = re.compile(r"Loaded image:\s*(\S+)")


def save_image(engine: Engine, ref: str, out: IO[bytes]) -> int:
    """Write `docker save REF` to `out` as it streams from the engine; returns the bytes written.

    Saving by tag keeps the tag in the archive, so `load_image` gives the image back under its name.
    """
    written = 0
    try:
        for chunk in engine.client.api.get_image(ref):
            out.write(chunk)
            written += len(chunk)
    except docker.errors.ImageNotFound as exc:
        raise EnvironmentProblem(
            f"image {ref} is not present on this Docker engine, so it cannot be saved; build or load it first"
        ) from exc
    except _ENGINE_ERRORS as exc:
        raise _problem(f"saving image {ref} failed", exc) from exc
    return written


def load_image(engine: Engine, stream: IO[bytes]) -> list[ImageInfo]:
    """`docker load` from an archive stream; returns the images it loaded (no registry is contacted)."""
    loaded: list[str] = []
    try:
        for event in engine.client.api.load_image(stream) or ():
            if event.get("error") or event.get("errorDetail"):
                detail = (event.get("errorDetail") or {}).get("message") or event.get("error")
                raise EnvironmentProblem(
                    f"loading an image archive failed: {detail}; is it a `docker save` file?"
                )
            text = str(event.get("stream", ""))
            for pattern in (_LOADED_ID, _LOADED_TAG):
                match = pattern.search(text)
                if match:
                    loaded.append(match.group(1))
    except _ENGINE_ERRORS as exc:
        raise _problem("loading an image archive failed", exc) from exc
    if not loaded:
        raise EnvironmentProblem("the engine loaded no image from the archive; is it a `docker save` file?")
    infos: dict[str, ImageInfo] = {}
    for ref in loaded:
        info = engine.inspect_image(ref)
        infos[info.id] = info
    return list(infos.values())
