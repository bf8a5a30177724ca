"""Align two runs' operation logs of one step and find the first pair of operations that differ.

The logs are equal-length only while the runs take the same path: a difference that changes control
flow (a data-dependent branch, a Python-level decision) adds or drops operations. Operations are
therefore paired by what they are (name, module, input shapes), not by position: a fast walk while
the keys agree, and where they stop agreeing a `difflib.SequenceMatcher` over a window of each log
finds where they agree again; the operations skipped on either side are the runs' different paths.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from reprobox.records.oplog import OpEvent

WINDOW = 400  # operations looked ahead on each side to realign the runs after their paths part


@dataclass(frozen=True)
class Pair:
    """One row of the alignment: an operation of each run, or of only one of them (a != b path)."""

    a: OpEvent | None
    b: OpEvent | None

    @property
    def matched(self) -> bool:
        return self.a is not None and self.b is not None

    @property
    def differs(self) -> bool:
        """Whether a matched pair read or wrote anything different (or drew from another RNG state)."""
        if self.a is None or self.b is None:
            return True
        a, b = self.a, self.b
        return (
            [x.identity for x in a.inputs] != [x.identity for x in b.inputs]
            or [x.identity for x in a.outputs] != [x.identity for x in b.outputs]
            or a.rng != b.rng
        )


def align(ops_a: Sequence[OpEvent], ops_b: Sequence[OpEvent]) -> Iterator[Pair]:
    """The two sequences as rows, in order: matched pairs, and the operations only one run ran."""
    i = j = 0
    while i < len(ops_a) and j < len(ops_b):
        if ops_a[i].key == ops_b[j].key:
            yield Pair(ops_a[i], ops_b[j])
            i, j = i + 1, j + 1
            continue
        skip_a, skip_b = _realign(ops_a[i : i + WINDOW], ops_b[j : j + WINDOW])
        if skip_a is None or skip_b is None:  # nothing in reach agrees: the rest is on separate paths
            break
        for k in range(skip_a):
            yield Pair(ops_a[i + k], None)
        for k in range(skip_b):
            yield Pair(None, ops_b[j + k])
        i, j = i + skip_a, j + skip_b
    for rest in ops_a[i:]:
        yield Pair(rest, None)
    for rest in ops_b[j:]:
        yield Pair(None, rest)


def _realign(window_a: Sequence[OpEvent], window_b: Sequence[OpEvent]) -> tuple[int | None, int | None]:
    """How many operations to skip on each side to reach the first run of operations both share."""
    keys_a = [op.key for op in window_a]
    keys_b = [op.key for op in window_b]
    matcher = SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for block in matcher.get_matching_blocks():
        if block.size:
            return block.a, block.b
    return None, None


def first_difference(rows: Sequence[Pair]) -> int | None:
    """The index of the first row where the runs differ (a value, or a path), or None."""
    return next((index for index, row in enumerate(rows) if row.differs), None)
