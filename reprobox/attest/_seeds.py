"""`predicate.seeds` (written by `verify --seeds`): its shape, and a spread that agrees with its values,
so a hand-edited mean or standard deviation is caught when the attestation is read."""

from __future__ import annotations

import math
import statistics
from typing import Any

from reprobox.records.attestation import FieldChecker

MAX_SEEDS = 100


def check_seeds(checker: FieldChecker, seeds: Any) -> None:
    if seeds is None:
        return
    field = "predicate.seeds"
    if not isinstance(seeds, dict):
        checker.fail(field, f"must be an object or null, not {type(seeds).__name__}")
        return
    listed = checker.get(seeds, "seeds", list, f"{field}.seeds")
    if listed is not None and not (
        2 <= len(listed) <= MAX_SEEDS and all(_whole(s) and 0 <= s < 2**32 for s in listed)
    ):
        checker.fail(f"{field}.seeds", f"must list 2 to {MAX_SEEDS} seeds, each from 0 to 2**32-1")
    claims = checker.get(seeds, "claims", dict, f"{field}.claims")
    for name, spread in (claims or {}).items():
        _check_spread(checker, f"{field}.claims.{name}"[:200], spread)


def _check_spread(checker: FieldChecker, field: str, spread: Any) -> None:
    if not isinstance(spread, dict):
        checker.fail(field, "must be an object with mean, std and values")
        return
    values = spread.get("values")
    if not isinstance(values, list) or not values or not all(_number(v) for v in values):
        checker.fail(f"{field}.values", "must be a non-empty list of finite numbers")
        return
    mean: Any = spread.get("mean")
    std: Any = spread.get("std")
    expected_std = statistics.stdev(values) if len(values) > 1 else 0.0
    if not (_number(mean) and _number(std)) or not (
        _close(float(mean), statistics.fmean(values)) and _close(float(std), expected_std)
    ):
        checker.fail(
            field,
            "mean and std do not match its values; the spread was edited after the attestation was made: "
            "get it again from the author",
        )


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
