"""Reading hash trails and finding where two runs first diverged (controller side, no torch)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from reprobox import saferead
from reprobox.guest import settings
from reprobox.records.manifest import RunRecord

LOSS_WINDOW = 5  # trail records shown on each side of the first divergence
TRAIL_LIMIT = saferead.GIB  # the job writes the trail: reading it is bounded like any of its files
LINE_LIMIT = 64 * saferead.MIB


@dataclass
class Trail:
    """One run's trail: parameter records by optimizer step, and scalars by step."""

    steps: dict[int, dict[str, Any]] = field(default_factory=dict)
    scalars: dict[int, dict[str, float]] = field(default_factory=dict)
    every: int | None = None
    skipped: int = 0  # lines that were not a trail record (torn, too long, or of the wrong shape)

    def digests(self, step: int) -> dict[str, str]:
        return {name: value[0] for name, value in self.steps[step].get("params", {}).items()}


def read_trail(path: Path, *, root: Path | None = None) -> Trail:
    """Parse trail.jsonl, streamed; a line that is not a record (a torn last line when the run was
    killed mid-write, or anything the job wrote there) is skipped and counted in `skipped`.

    A trail that is not a regular file, or is over TRAIL_LIMIT bytes, raises saferead.UnsafeFile.
    """
    trail = Trail()
    try:
        for line in saferead.iter_lines(path, limit=TRAIL_LIMIT, line_limit=LINE_LIMIT, root=root):
            if line is not None and not line.strip():
                continue
            if line is None or not _add(trail, line):
                trail.skipped += 1
    except FileNotFoundError:
        pass
    return trail


def _add(trail: Trail, line: bytes) -> bool:
    """Add one line's record to `trail`; False when the line is not a record of the expected shape."""
    try:
        item = json.loads(line)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    if not isinstance(item, dict):
        return False
    if "schema" in item:
        every = item.get("every", trail.every)
        trail.every = every if _is_int(every) else trail.every
        return every is None or _is_int(every)
    if "params" in item:
        step, scalars = item.get("step"), item.get("scalars") or {}
        if not (_is_int(step) and _params_ok(item["params"]) and _scalars_ok(scalars)):
            return False
        trail.steps[step] = item
    else:
        step, scalars = item.get("step_scalars"), item.get("scalars", {})
        if not (_is_int(step) and _scalars_ok(scalars)):
            return False
    if scalars:
        trail.scalars.setdefault(step, {}).update(scalars)
    return True


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _params_ok(params: Any) -> bool:
    """{name: [digest, norm, ...]}: what digests() and divergence_series() index into."""
    return isinstance(params, dict) and all(
        isinstance(value, list)
        and len(value) >= 3
        and isinstance(value[0], str)
        and _is_number(value[1])
        and _is_number(value[2])
        for value in params.values()
    )


def _scalars_ok(scalars: Any) -> bool:
    return isinstance(scalars, dict) and all(_is_number(v) for v in scalars.values())


def trail_of(record: RunRecord) -> Trail | None:
    name = record.data.get("trail")
    if not name:
        return None
    return read_trail(record.run_dir / str(name or settings.TRAIL_FILE), root=record.run_dir)


def first_divergence(a: Trail, b: Trail) -> dict[str, Any] | None:
    """The first optimizer step recorded by both runs where any parameter digest differs.

    With a sparse trail this brackets the divergence: after ``previous_identical_step`` (equal), by
    ``step`` (differs); ``exact`` says whether the two are consecutive.
    """
    for step in sorted(set(a.steps) & set(b.steps)):
        da, db = a.digests(step), b.digests(step)
        if a.steps[step].get("model") == b.steps[step].get("model") and da == db:
            continue
        parameters = sorted(n for n in set(da) | set(db) if da.get(n) != db.get(n))
        previous = _previous_step(a, b, step)
        return {
            "step": step,
            "parameters": parameters,
            "previous_identical_step": previous,
            # exact: the step before was recorded equal; else the divergence lies in (previous, step]
            "exact": previous is not None and step - previous <= 1,
            "loss": {"a": _window(a, step), "b": _window(b, step)},
        }
    return None


def common_prefix_identical(a: Trail, b: Trail) -> tuple[bool, int]:
    """Whether every step both trails recorded is identical, and the last such step."""
    common = sorted(set(a.steps) & set(b.steps))
    if not common:
        return False, 0
    return first_divergence(a, b) is None, common[-1]


def divergence_series(a: Trail, b: Trail) -> list[tuple[int, float]]:
    """Per recorded step, the largest drift between the runs' parameters (difference of their L2 norms)."""
    series = []
    for step in sorted(set(a.steps) & set(b.steps)):
        pa, pb = a.steps[step].get("params", {}), b.steps[step].get("params", {})
        drift = 0.0
        for name in set(pa) & set(pb):
            if pa[name][0] != pb[name][0]:
                drift = max(
                    drift,
                    abs(float(pa[name][2]) - float(pb[name][2])),
                    abs(float(pa[name][1]) - float(pb[name][1])),
                )
        series.append((step, drift))
    return series


def loss_series(trail: Trail, key: str = "loss") -> list[tuple[int, float]]:
    return [(step, values[key]) for step, values in sorted(trail.scalars.items()) if key in values]


def _previous_step(a: Trail, b: Trail, step: int) -> int | None:
    earlier = [s for s in set(a.steps) & set(b.steps) if s < step]
    return max(earlier) if earlier else None


def _window(trail: Trail, step: int) -> list[list[float]]:
    steps = sorted(s for s in trail.scalars if "loss" in trail.scalars[s])
    if not steps:
        return []
    index = next((i for i, s in enumerate(steps) if s >= step), len(steps))
    chosen = steps[max(0, index - LOSS_WINDOW) : index + LOSS_WINDOW + 1]
    return [[s, trail.scalars[s]["loss"]] for s in chosen]
