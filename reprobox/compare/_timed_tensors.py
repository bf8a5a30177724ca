"""Arrays of durations inside checkpoints, judged element by element by each run's record of its clocks.

Some libraries keep what they timed in the file they save: scikit-learn's fitted search holds
``cv_results_['mean_fit_time']`` and its kin as arrays in the joblib file, a trainer its iteration times
in the checkpoint. Such a tensor differs in every run, and is excused only where every element that
differs is, in its own run, a figure of that run's clock to the digit (a duration, or a mean, sum or
spread of durations measured in a row: ``runspecific.judge_elements``). Weights, scores and arrays drawn
from a seeded generator meet no such figure and stay a real difference, whatever they are named.

Only small numeric arrays of the same dtype and shape in both runs are looked at (at most
``MAX_ELEMENTS``), and only where both runs recorded their clocks; reading them needs torch, as the
tensor statistics do. Any failure to read leaves the tensor a difference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reprobox import outputvalues
from reprobox.records.manifest import RunRecord
from reprobox.runspecific import RunContext, judge_elements

MAX_ELEMENTS = 1 << 16
_NUMERIC = ("float", "int", "uint", "bfloat")


def excuse_timed_tensors(
    a: RunRecord,
    b: RunRecord,
    paths: tuple[str, str],
    names: Sequence[str],
    contexts: tuple[RunContext, RunContext],
    *,
    name_in_b: Callable[[str], str] = str,
) -> tuple[list[str], list[dict[str, Any]]]:
    """The names that still differ, and a run-specific entry for each tensor whose differing elements
    the runs' records explain (``name_in_b``: run b's name for each, where an archive's members pair by
    their names' run-specific parts)."""
    if contexts[0].clock is None or contexts[1].clock is None:
        return list(names), []
    meta_a = _tensor_entries(a.checkpoint(paths[0]) or {})
    meta_b = _tensor_entries(b.checkpoint(paths[1]) or {})
    candidates = [n for n in names if _small_numeric(meta_a.get(n), meta_b.get(name_in_b(n)))]
    if not candidates:
        return list(names), []
    loaded = _load_both(a, b, paths)
    if loaded is None:
        return list(names), []
    tensors_a, tensors_b = loaded
    excused: list[dict[str, Any]] = []
    for name in candidates:
        pairs = _differing_elements(tensors_a, tensors_b, name, name_in_b(name))
        excuse = judge_elements(name, pairs, *contexts) if pairs else None
        if excuse is None:
            continue
        first_a, first_b = pairs[0]
        excused.append(
            {
                "checkpoint": paths[0],
                "name": name,
                "a": outputvalues.shown(name, first_a),
                "b": outputvalues.shown(name, first_b),
                "reason": excuse.reason,
                "evidence": excuse.evidence,
            }
        )
    done = {e["name"] for e in excused}
    return [n for n in names if n not in done], excused


def _tensor_entries(checkpoint: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {t["name"]: t for t in checkpoint.get("tensors") or [] if isinstance(t, Mapping) and "name" in t}


def _small_numeric(ta: Mapping[str, Any] | None, tb: Mapping[str, Any] | None) -> bool:
    if ta is None or tb is None or ta.get("dtype") != tb.get("dtype") or ta.get("shape") != tb.get("shape"):
        return False
    dtype, shape = str(ta.get("dtype")), ta.get("shape")
    if not dtype.startswith(_NUMERIC) or not isinstance(shape, list):
        return False
    return all(type(d) is int and d >= 0 for d in shape) and math.prod(shape) <= MAX_ELEMENTS


def _load_both(a: RunRecord, b: RunRecord, paths: tuple[str, str]) -> tuple[Any, Any] | None:
    file_a = outputvalues.output_file(a.output_dir, paths[0])
    file_b = outputvalues.output_file(b.output_dir, paths[1])
    if file_a is None or file_b is None:
        return None
    try:
        from reprobox.guest.hashing import load_tensors

        return load_tensors(file_a)[0], load_tensors(file_b)[0]
    except Exception:  # noqa: BLE001 - an array not read back stays a difference, never a crash
        return None


def _differing_elements(tensors_a: Any, tensors_b: Any, name: str, name_b: str) -> list[tuple[float, float]]:
    """Each element pair that differs, as Python numbers (a float32 element keeps its own precision)."""
    try:
        values_a, values_b = tensors_a[name].flatten().tolist(), tensors_b[name_b].flatten().tolist()
    except Exception:  # noqa: BLE001 - as above
        return []
    if len(values_a) != len(values_b):
        return []
    return [(x, y) for x, y in zip(values_a, values_b, strict=True) if x != y and not _both_nan(x, y)]


def _both_nan(x: float, y: float) -> bool:
    return isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)
