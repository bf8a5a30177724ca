"""Where two runs' hash trails first diverged, and how far apart they drifted (controller side, no torch).

The trail's file format and its bounded reader live in `reprobox.records.trail`; this module only
analyses trails that were read.
"""

from __future__ import annotations

import math
from typing import Any

from reprobox.records.manifest import RunRecord
from reprobox.records.trail import HashTrail, read_trail

LOSS_WINDOW = 5  # trail records shown on each side of the first divergence


def trail_of(record: RunRecord) -> HashTrail | None:
    """The run's trail, read as a file its job could have replaced; None when it recorded none."""
    path = record.trail_path
    return None if path is None else read_trail(path, root=record.run_dir)


def first_divergence(a: HashTrail, b: HashTrail) -> dict[str, Any] | None:
    """The first optimizer step recorded by both runs where any parameter digest differs.

    With a sparse trail this brackets the divergence: after ``previous_identical_step`` (equal), by
    ``step`` (differs); ``exact`` says whether the two are consecutive.
    """
    for step in sorted(set(a.steps) & set(b.steps)):
        da, db = a.steps[step].digests(), b.steps[step].digests()
        values = _differing_values(a.steps[step].scalars, b.steps[step].scalars)
        if a.steps[step].model == b.steps[step].model and da == db and not values:
            continue
        parameters = sorted(n for n in set(da) | set(db) if da.get(n) != db.get(n))
        previous = _previous_step(a, b, step)
        return {
            "step": step,
            "parameters": parameters,
            # the job's values recorded with the step that differ (its loss): a computation that
            # differed, even where the parameters it updated came out equal
            "values": values,
            "previous_identical_step": previous,
            # exact: the step before was recorded equal; else the divergence lies in (previous, step]
            "exact": previous is not None and step - previous <= 1,
            "loss": {"a": _window(a, step), "b": _window(b, step)},
        }
    return None


COMPARED_VALUES = ("loss",)  # recorded by the trail itself from the job's backward(), never a time


def _differing_values(a: dict[str, float], b: dict[str, float]) -> list[str]:
    """Which compared values both steps recorded and differ bit for bit (two NaNs are the same)."""
    return [
        key
        for key in COMPARED_VALUES
        if key in a and key in b and a[key] != b[key] and not (math.isnan(a[key]) and math.isnan(b[key]))
    ]


def state_differences(reference: HashTrail, other: HashTrail, after: int) -> tuple[int, list[str]] | None:
    """The first step after `after` both trails digested state at where some state differs, and which
    (RNG streams, optimizers, schedulers; a key only one run has differs too); None when none does."""
    for step in sorted(set(reference.steps) & set(other.steps)):
        a, b = reference.steps[step].state, other.steps[step].state
        if step <= after or not a or not b:
            continue
        differing = sorted((k for k in set(a) | set(b) if a.get(k) != b.get(k)), key=_state_order)
        if differing:
            return step, differing
    return None


# A scheduler left unrestored also leaves the optimizer's learning rate wrong, not the other way round:
# the likelier cause comes first.
_STATE_PRIORITY = ("rng.", "scheduler.", "optimizer.")


def _state_order(key: str) -> tuple[int, str]:
    rank = next(
        (i for i, prefix in enumerate(_STATE_PRIORITY) if key.startswith(prefix)), len(_STATE_PRIORITY)
    )
    return rank, key


def common_prefix_identical(a: HashTrail, b: HashTrail) -> tuple[bool, int]:
    """Whether every step both trails recorded is identical, and the last such step."""
    common = sorted(set(a.steps) & set(b.steps))
    if not common:
        return False, 0
    return first_divergence(a, b) is None, common[-1]


def divergence_series(a: HashTrail, b: HashTrail) -> list[tuple[int, float]]:
    """Per recorded step, the largest drift between the runs' parameters (difference of their L2 norms)."""
    series = []
    for step in sorted(set(a.steps) & set(b.steps)):
        pa, pb = a.steps[step].params, b.steps[step].params
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


def loss_series(trail: HashTrail, key: str = "loss") -> list[tuple[int, float]]:
    return [(step, values[key]) for step, values in sorted(trail.scalars.items()) if key in values]


def _previous_step(a: HashTrail, b: HashTrail, step: int) -> int | None:
    earlier = [s for s in set(a.steps) & set(b.steps) if s < step]
    return max(earlier) if earlier else None


def _window(trail: HashTrail, step: int) -> list[list[float]]:
    steps = sorted(s for s in trail.scalars if "loss" in trail.scalars[s])
    if not steps:
        return []
    index = next((i for i, s in enumerate(steps) if s >= step), len(steps))
    chosen = steps[max(0, index - LOSS_WINDOW) : index + LOSS_WINDOW + 1]
    return [[s, trail.scalars[s]["loss"]] for s in chosen]
