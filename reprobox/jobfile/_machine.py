"""What the job runs on: its image, the resources it may use and how many processes launch it."""

from __future__ import annotations

import re
from typing import Any

from reprobox.jobfile._checker import Checker, describe, shorten
from reprobox.jobfile._limits import (
    MAX_CPUS,
    MAX_PIDS,
    MAX_PROCESSES,
    MAX_SIZE,
    MIN_CPUS,
    MIN_MEMORY,
    SIZE_UNITS,
)
from reprobox.jobfile.schema import LAUNCHER_TYPES, ImageSpec, Launcher, Resources


def check_image(c: Checker, value: Any) -> ImageSpec:
    if value is None:
        return ImageSpec()
    if isinstance(value, str):
        if not value.strip() or any(char.isspace() for char in value):
            c.fail("image", f"{value!r} is not an image reference; use e.g. 'registry/name:tag@sha256:...'")
        return ImageSpec(reference=value)
    entry = c.mapping(value, "image")
    if entry is None:
        return ImageSpec()
    c.check_keys(entry, ("base", "requirements", "wheelhouse"), "image")
    base = entry.get("base")
    if base is not None and (not isinstance(base, str) or not base.strip()):
        c.fail("image.base", "must be an image reference such as 'debian:bookworm'")
        base = None
    requirements = wheelhouse = None
    if "requirements" in entry:
        requirements = c.relative_path(entry["requirements"], "image.requirements", must_be_dir=False)
    if "wheelhouse" in entry:
        wheelhouse = c.relative_path(entry["wheelhouse"], "image.wheelhouse", must_be_dir=True)
    return ImageSpec(base=base, requirements=requirements, wheelhouse=wheelhouse)


def check_resources(c: Checker, value: Any) -> Resources:
    entry = c.mapping(value, "resources")
    if entry is None:
        return Resources()
    c.check_keys(entry, tuple(Resources.__dataclass_fields__), "resources")
    gpus = check_gpus(c, entry.get("gpus"))
    memory = check_size(c, entry.get("memory"), "resources.memory", minimum=MIN_MEMORY)
    shm_size = check_size(c, entry.get("shm_size"), "resources.shm_size", minimum=1)
    cpus = entry.get("cpus")
    if cpus is not None and (
        isinstance(cpus, bool) or not isinstance(cpus, int | float) or not MIN_CPUS <= cpus <= MAX_CPUS
    ):
        c.fail(
            "resources.cpus",
            f"must be a number of CPUs from {MIN_CPUS:g} to {MAX_CPUS:g}, not {describe(cpus)}",
        )
        cpus = None
    pids = entry.get("pids", Resources.pids)
    if isinstance(pids, bool) or not isinstance(pids, int) or not 16 <= pids <= MAX_PIDS:
        c.fail("resources.pids", f"must be an integer from 16 to {MAX_PIDS}, not {describe(pids)}")
        pids = Resources.pids
    return Resources(
        gpus=gpus,
        memory=memory,
        cpus=float(cpus) if cpus is not None else None,
        shm_size=shm_size,
        pids=pids,
    )


def check_gpus(c: Checker, value: Any) -> str | tuple[int, ...] | None:
    if value is None or value == 0:
        return None if value is None else ()
    if value == "all":
        return "all"
    if isinstance(value, list) and all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value
    ):
        return tuple(value)
    c.fail("resources.gpus", f"must be 0, 'all', or a list of GPU indices such as [0, 1], not {value!r}")
    return None


def check_size(c: Checker, value: Any, dotted: str, *, minimum: int) -> str | None:
    if value is None:
        return None
    text = str(value).strip().lower() if isinstance(value, str | int | float) else ""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([bkmg]?)", text)
    if isinstance(value, bool) or match is None:
        c.fail(dotted, f"{shorten(value)!r} is not a size; use e.g. '512m' or '8g'")
        return None
    size = float(match.group(1)) * SIZE_UNITS[match.group(2)]
    if not minimum <= size <= MAX_SIZE:
        c.fail(
            dotted,
            f"{text} is outside {_size_text(minimum)} to {_size_text(MAX_SIZE)}; use e.g. '512m' or '8g'",
        )
        return None
    return text


def check_launcher(c: Checker, value: Any) -> Launcher:
    entry = c.mapping(value, "launcher")
    if entry is None:
        return Launcher()
    c.check_keys(entry, ("type", "nproc_per_node", "nnodes"), "launcher")
    kind = entry.get("type", "none")
    if kind not in LAUNCHER_TYPES:
        c.fail("launcher.type", f"{kind!r} is not a launcher; use 'torchrun' or 'none'")
        kind = "none"
    counts = {}
    for key in ("nproc_per_node", "nnodes"):
        number = entry.get(key, 1)
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_PROCESSES:
            c.fail(
                f"launcher.{key}",
                f"must be an integer from 1 to {MAX_PROCESSES}, not {describe(number)}",
            )
            number = 1
        counts[key] = number
    return Launcher(type=kind, **counts)


def _size_text(size: int) -> str:
    for unit in ("g", "m", "k"):
        if size >= SIZE_UNITS[unit] and size % SIZE_UNITS[unit] == 0:
            return f"{size // SIZE_UNITS[unit]}{unit}"
    return f"{size}b"
