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
_FROM_STEP = re.compile(r"^(?:\[\d+/\d+\] )?(?:Step \d+/\d+ : |STEP \d+/\d+: )FROM\s", re.IGNORECASE)
_MADE = re.compile(r"^\s*-{2,3}> ([0-9a-f]{12,64})\s*$")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ImageInfo:
    """What the manifest records about an image."""

    id: str
    repo_digests: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    user: str = ""  # the image's configured user (Config.User), "" for root
    tags: tuple[str, ...] = ()
    size: int = 0  # bytes of all its layers, those it shares with other images included
    layers: tuple[str, ...] = ()  # the diff ids of its layers, bottom first (RootFS.Layers)

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

    def list_images(
        self, labels: Mapping[str, str] | Sequence[str] = (), *, intermediate: bool = False
    ) -> list[ImageInfo]:
        """Images carrying every given label (`{"k": "v"}` or `["k", "k=v"]`); with `intermediate`, also
        the untagged steps of builds that other images are built on (which layers each holds)."""
        filters = {"label": label_filters(labels)} if labels else None
        with translated("listing images failed"):
            found = self.client.api.images(all=intermediate, filters=filters)
        infos = []
        for item in found:
            with translated(f"inspecting image {item['Id']} failed", tolerate=image_absent):
                infos.append(_image_info(self.client.api.inspect_image(item["Id"])))  # unless gone since
        return infos

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
        stages = _StageImages()
        try:
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
                        stages.read(line)
                        if _STEP.match(line) and failure is None:
                            step = line
                        progress(line)
                    if failure is None and ("error" in event or "errorDetail" in event):
                        detail = event.get("errorDetail", {}).get("message") or event.get("error")
                        failure = str(detail or "unknown error")
                        tail.append(f"error: {failure}")
        finally:
            self._remove_untagged(stages.left_behind(finished=failure is None))
        if failure is not None:
            raise self._build_failure(tag, step, failure, tail, base_image)
        return self.inspect_image(tag)

    def _remove_untagged(self, image_ids: Sequence[str]) -> None:
        """Remove each image that has no tag and no digest (a finished stage, or the last step a failed
        build made), with its untagged parents; one that others still build on stays (the engine refuses)."""
        for image_id in image_ids:
            # Gone already, or still the parent of another image (409): nothing of ours is left either way.
            with translated(f"removing image {image_id} failed", tolerate=_gone_or_in_use):
                data = self.client.api.inspect_image(image_id)
                if not (data.get("RepoTags") or data.get("RepoDigests")):
                    self.client.api.remove_image(image_id)

    def _build_failure(
        self, tag: str, step: str, detail: str, tail: Sequence[str], base_image: str | None
    ) -> EngineError:
        log_tail = "\n".join(tail)
        if base_image and not self.image_exists(base_image):
            return BaseImageMissing(base_image, log_tail=log_tail)
        return BuildFailed(tag, step, detail, log_tail=log_tail)


class _StageImages:
    """The images a multi-stage build leaves untagged, read from its output: the last image of each stage
    before the next `FROM`, and (when the build fails) the last image it made. Docker writes
    `Step 3/9 : FROM ...` and ` ---> 1a2b3c4d5e6f`; Podman (buildah) `STEP 3/9: FROM ...` and
    `--> 1a2b3c4d5e6f`."""

    def __init__(self) -> None:
        self.stage_ends: list[str] = []
        self.last: str | None = None

    def read(self, line: str) -> None:
        made = _MADE.match(line)
        if made:
            self.last = made.group(1)
        elif _FROM_STEP.match(line) and self.last is not None:
            self.stage_ends.append(self.last)

    def left_behind(self, *, finished: bool) -> list[str]:
        ends = list(dict.fromkeys(self.stage_ends))
        return ends if finished or self.last is None else [*ends, self.last]


def _gone_or_in_use(exc: Exception) -> bool:
    return image_absent(exc) or status_in(exc, 404, 409)


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
        size=int(data.get("Size") or 0),
        layers=tuple((data.get("RootFS") or {}).get("Layers") or ()),
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
