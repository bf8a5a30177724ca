"""A refactor that renames a module or a parameter changes the names in the checkpoint, not its numbers.

Two versions whose outputs and trails differ only in the names of tensors that are equal (same dtype,
shape and bytes, one for one) computed the same numbers: the diff is numerically identical, and the
renames are listed. Anything else that differs (a value, a tensor's bytes, a file only one wrote, the
loss at a step) is left to the comparison.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from reprobox import trails
from reprobox.compare import Comparison
from reprobox.records.manifest import RunRecord


def renamed_tensors(a: RunRecord, b: RunRecord, comparison: Comparison) -> dict[str, str] | None:
    """{`file: old name`: new name} when renames are all that differs, else None."""
    if comparison.value_differences or comparison.one_sided or comparison.unreadable:
        return None
    files_a = {str(c.get("path")): c for c in a.checkpoints}
    files_b = {str(c.get("path")): c for c in b.checkpoints}
    if set(files_a) != set(files_b):
        return None
    renames: dict[str, str] = {}
    for path, x in files_a.items():
        y = files_b[path]
        if x.get("content_sha256") == y.get("content_sha256"):
            continue
        if x.get("metadata_sha256") != y.get("metadata_sha256"):
            return None
        paired = _pair(
            {t["name"]: _content(t) for t in x.get("tensors") or []},
            {t["name"]: _content(t) for t in y.get("tensors") or []},
        )
        if paired is None:
            return None
        renames.update({f"{path}: {old}": new for old, new in paired.items()})
    if not _trails_equal_but_names(a, b):
        return None
    return renames or None


def _content(tensor: dict[str, Any]) -> str:
    return f"{tensor.get('dtype')}{tensor.get('shape')}:{tensor.get('sha256')}"


def _pair(a: dict[str, str], b: dict[str, str]) -> dict[str, str] | None:
    """Old name -> new name for equal contents under different names; None when the contents differ."""
    if Counter(a.values()) != Counter(b.values()):
        return None
    only_a = sorted(n for n in a if b.get(n) != a[n])
    free: dict[str, list[str]] = defaultdict(list)
    for name in sorted(n for n in b if a.get(n) != b[n]):
        free[b[name]].append(name)
    return {name: free[a[name]].pop(0) for name in only_a}


def _trails_equal_but_names(a: RunRecord, b: RunRecord) -> bool:
    trail_a, trail_b = trails.trail_of(a), trails.trail_of(b)
    if trail_a is None or trail_b is None:
        return trail_a is None and trail_b is None
    if set(trail_a.steps) != set(trail_b.steps):
        return False
    for step, x in trail_a.steps.items():
        y = trail_b.steps[step]
        if Counter(x.digests().values()) != Counter(y.digests().values()):
            return False
        if x.scalars.get("loss") != y.scalars.get("loss"):
            return False
    return True
