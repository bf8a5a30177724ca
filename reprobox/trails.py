"""Reading hash trails and finding where two runs first diverged (controller side, no torch)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobox.guest import settings
from reprobox.manifest import RunRecord

LOSS_WINDOW = 5  # trail records shown on each side of the first divergence


@dataclass
class Trail:
    """One run's trail: parameter records by optimizer step, and scalars by step."""

    steps: dict[int, dict[str, Any]] = field(default_factory=dict)
    scalars: dict[int, dict[str, float]] = field(default_factory=dict)
    every: int | None = None

    def digests(self, step: int) -> dict[str, str]:
        return {name: value[0] for name, value in self.steps[step].get("params", {}).items()}


def read_trail(path: Path) -> Trail:
    """Parse trail.jsonl; a torn last line (the run was killed mid-write) is ignored."""
    trail = Trail()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return trail
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if "schema" in item:
            trail.every = item.get("every", trail.every)
        elif "params" in item:
            step = int(item["step"])
            trail.steps[step] = item
            if item.get("scalars"):
                trail.scalars.setdefault(step, {}).update(item["scalars"])
        elif "step_scalars" in item:
            trail.scalars.setdefault(int(item["step_scalars"]), {}).update(item.get("scalars", {}))
    return trail


def trail_of(record: RunRecord) -> Trail | None:
    name = record.data.get("trail")
    if not name:
        return None
    return read_trail(record.run_dir / str(name or settings.TRAIL_FILE))


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
