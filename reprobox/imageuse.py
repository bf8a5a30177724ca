"""Which reprobox images the run records use, what each costs on disk, and which no record needs.

A job's image is the shared image plus a layer of its extras (see `reprobox.image`), so images share
layers: what removing one frees is the bytes of the layers no image that stays still uses. The engine
keeps a layer once however many images hold it (layers are keyed by their chain of diff ids); each
image's size covers all its layers. The layers' sizes are read off the engine's images themselves: the
size of an image whose layers are the first k of another's is the size of those k layers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox.errors import SpecError
from reprobox.image import MANAGED_LABEL, SHARED_IMAGE_LABEL
from reprobox.records.manifest import MANIFEST_NAME, read_record

if TYPE_CHECKING:  # the docker SDK is imported only where an engine is opened
    from reprobox.engine import Engine, ImageInfo

IMAGE_LABEL = "io.reprobox.image"  # set by the Dockerfile: every reprobox image, built by reprobox or not


@dataclass(frozen=True)
class ImageUse:
    """A reprobox image, the run records that name it, and its size."""

    info: ImageInfo
    runs: tuple[Path, ...]  # the run directories whose record names this image
    jobs: Mapping[str, int]  # job name -> how many of those runs
    adds: int  # bytes it adds to the image it is built on (its shared image), else its whole size
    shared: str | None = None  # the shared image a job's extras layer on

    @property
    def name(self) -> str:
        return ", ".join(self.info.tags) or self.info.id[:19]

    def to_json(self) -> dict[str, Any]:
        labels = self.info.labels
        extras = labels.get("io.reprobox.extras", "")
        return {
            "id": self.info.id,
            "tags": list(self.info.tags),
            "size": self.info.size,
            "adds": self.adds,
            "shared_image": self.shared,
            "extras": extras.split() if extras else [],
            "base": labels.get("io.reprobox.base"),
            "lock": labels.get("io.reprobox.lock"),
            "reprobox_version": labels.get("io.reprobox.version"),
            "jobs": dict(sorted(self.jobs.items())),
            "runs": [str(run) for run in self.runs],
        }


@dataclass(frozen=True)
class Removal:
    """An image no run record names, and the bytes removing it frees (after those listed before it)."""

    info: ImageInfo
    frees: int
    name: str = field(default="")


def runs_by_image(runs_dir: Path) -> dict[str, list[tuple[str, Path]]]:
    """Image id -> (job name, run dir) of each recorded run under `runs_dir` that ran in it."""
    users: dict[str, list[tuple[str, Path]]] = {}
    for manifest in sorted(runs_dir.glob(f"*/*/{MANIFEST_NAME}")):
        if manifest.parent.is_symlink():  # runs/<job>/latest names a run that is listed under its own id
            continue
        try:
            record = read_record(manifest)
        except SpecError:  # a damaged record elsewhere must not break the listing
            continue
        if record.image_id:
            users.setdefault(record.image_id, []).append((record.job_name, manifest.parent))
    return users


def image_uses(engine: Engine, runs_dir: Path) -> list[ImageUse]:
    """Every reprobox image on the engine with the records that use it, shared images first."""
    found = engine.list_images([IMAGE_LABEL])
    by_tag = {tag: info for info in found for tag in info.tags}
    users = runs_by_image(runs_dir)
    uses = []
    for info in found:
        shared_tag = info.labels.get(SHARED_IMAGE_LABEL)
        shared = by_tag.get(shared_tag) if shared_tag else None
        runs = users.get(info.id, [])
        jobs: dict[str, int] = {}
        for job, _ in runs:
            jobs[job] = jobs.get(job, 0) + 1
        adds = info.size - shared.size if shared is not None else info.size
        uses.append(ImageUse(info, tuple(run for _, run in runs), jobs, adds, shared_tag))
    return sorted(uses, key=lambda use: (use.shared is not None, use.shared or "", use.name))


def unused_images(engine: Engine, runs_dir: Path) -> list[Removal]:
    """The images reprobox built that no record under `runs_dir` names, each with the bytes its removal
    frees, in an order that can remove them: a job's image before the shared image it builds on. A
    shared image that an image staying builds on stays too (removing it would free nothing)."""
    everything = engine.list_images(intermediate=True)
    top = engine.list_images()  # tagged, or untagged with nothing built on them
    used = set(runs_by_image(runs_dir))
    removed = {info.id for info in top if info.labels.get(MANAGED_LABEL) == "true" and info.id not in used}
    changed = True
    while changed:  # keep what any image that stays builds on
        changed = False
        for info in top:
            if info.id in removed and any(
                _builds_on(other, info) for other in top if other.id not in removed
            ):
                removed.discard(info.id)
                changed = True
    order = sorted((info for info in top if info.id in removed), key=lambda info: -len(info.layers))
    blocks = _LayerBlocks(everything)
    held = {block for info in top if info.id not in removed for block in blocks.of(info)}
    removals = []
    for index, info in enumerate(order):
        later = {block for other in order[index + 1 :] for block in blocks.of(other)}
        frees = sum(size for block, size in blocks.sized(info) if block not in held and block not in later)
        removals.append(Removal(info, frees, ", ".join(info.tags) or info.id[:19]))
    return removals


def size_text(nbytes: int) -> str:
    """Bytes as `docker images` shows them (powers of 1000)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.{2 if unit == 'GB' else 1}f} {unit}"
    return f"{nbytes} B"


def _builds_on(image: ImageInfo, base: ImageInfo) -> bool:
    """True when `image` has every layer of `base` below its own (and more)."""
    return (
        bool(base.layers)
        and len(image.layers) > len(base.layers)
        and (image.layers[: len(base.layers)] == base.layers)
    )


class _LayerBlocks:
    """Each image's layers as blocks whose sizes are known: a block ends where some image's layers end."""

    def __init__(self, everything: Sequence[ImageInfo]) -> None:
        self.sizes: dict[str, int] = {}
        for info in everything:
            if info.layers:
                self.sizes[_chain(info.layers)[-1]] = info.size

    def sized(self, info: ImageInfo) -> list[tuple[str, int]]:
        blocks, below = [], 0
        chain = _chain(info.layers)
        for index, key in enumerate(chain):
            size = info.size if index == len(chain) - 1 else self.sizes.get(key)
            if size is not None:
                blocks.append((key, size - below))
                below = size
        return blocks

    def of(self, info: ImageInfo) -> list[str]:
        return [key for key, _ in self.sized(info)]


def _chain(layers: Sequence[str]) -> list[str]:
    """The engine's chain ids of a stack of layers: one per layer, naming it with all below it."""
    chain: list[str] = []
    for layer in layers:
        chain.append(
            layer if not chain else "sha256:" + hashlib.sha256(f"{chain[-1]} {layer}".encode()).hexdigest()
        )
    return chain
