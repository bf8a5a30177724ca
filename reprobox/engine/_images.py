"""The engine's image verbs: whether an image is here, what it is, pull, build, remove."""

from __future__ import annotations

import collections
import functools
import io
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from reprobox.engine._errors import (
    BaseImageMissing,
    BuildFailed,
    EngineError,
    ImageMissing,
    PullFailed,
    pull_action,
)
from reprobox.engine._translate import image_absent, status_in, translated

LOG_TAIL_LINES = 20
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


class ImageVerbs:
    """Image verbs of `Engine`; every SDK call goes through `translated`."""

    client: Any

    def image_exists(self, ref: str) -> bool:
        with translated(f"inspecting image {ref} failed", tolerate=_cannot_exist):
            self.client.api.inspect_image(ref)
            return True
        return False

    def inspect_image(self, ref: str) -> ImageInfo:
        missing = functools.partial(ImageMissing, ref, fix="build it, or pull or load it first")
        with translated(f"inspecting image {ref} failed", missing=missing):
            data = self.client.api.inspect_image(ref)
        return _image_info(data)

    def list_images(self, labels: Mapping[str, str] | Sequence[str]) -> list[ImageInfo]:
        """Images carrying every given label (`{"k": "v"}` or `["k", "k=v"]`)."""
        with translated("listing images failed"):
            found = self.client.api.images(filters={"label": label_filters(labels)})
        return [self.inspect_image(item["Id"]) for item in found]

    def pull(self, ref: str, progress: Progress) -> ImageInfo:
        with translated(pull_action(ref), error=lambda _action, why: PullFailed(ref, why)):
            for event in self.client.api.pull(ref, stream=True, decode=True):
                if event.get("error"):
                    raise PullFailed(ref, str(event["error"]), in_stream=True)
                if event.get("status") and not event.get("progressDetail"):
                    progress(f"{event.get('id', ref)}: {event['status']}")
        return self.inspect_image(ref)

    def remove_image(self, ref: str, *, force: bool = False) -> None:
        with translated(f"removing image {ref} failed", tolerate=image_absent):
            self.client.api.remove_image(ref, force=force)

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
        tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
        step = "the start"

        def refused(reason: str) -> EngineError:
            return self._build_failure(tag, step, reason, tail, base_image)

        failure: str | None = None
        with translated(f"building image {tag} failed", refused=refused):
            stream = self.client.api.build(
                fileobj=_as_file(context),
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
        if failure is not None:
            raise self._build_failure(tag, step, failure, tail, base_image)
        return self.inspect_image(tag)

    def _build_failure(
        self, tag: str, step: str, detail: str, tail: Sequence[str], base_image: str | None
    ) -> EngineError:
        log_tail = "\n".join(tail)
        if base_image and not self.image_exists(base_image):
            return BaseImageMissing(base_image, log_tail=log_tail)
        return BuildFailed(tag, step, detail, log_tail=log_tail)


def _cannot_exist(exc: Exception) -> bool:
    """Not found, or an invalid reference (400), which cannot exist."""
    return image_absent(exc) or status_in(exc, 400, 404)


def _image_info(data: Mapping[str, Any]) -> ImageInfo:
    config = data.get("Config") or {}
    return ImageInfo(
        id=str(data["Id"]),
        repo_digests=tuple(data.get("RepoDigests") or ()),
        labels=dict(config.get("Labels") or {}),
        user=str(config.get("User") or ""),
        tags=tuple(data.get("RepoTags") or ()),
    )


def label_filters(labels: Mapping[str, str] | Sequence[str]) -> list[str]:
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


def _as_file(context: bytes | IO[bytes]) -> IO[bytes]:
    if isinstance(context, bytes | bytearray):
        return io.BytesIO(context)
    return context
