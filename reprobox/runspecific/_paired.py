"""Two runs' numbers judged together: each the same figure of its own run's clock, measured at the same
place in the code.

A rounded figure of a run that reads its clock often is untestable alone: ``1222 effective words/s``
(gensim's ``%.0f`` of 17 words over the training's duration) meets some count over some difference of
the record's readings by chance, as many lie near it. But the two runs ran the same code: the value of
each is that figure of the same difference, the ``i``-th reading at one call site minus the latest
earlier reading at another (the same two ``file:line`` sites of the same clock, the same ``i``). A
match there in both runs is no chance where the number of such places that a random value of each run
would meet, counted over every place and every figure tried, is expected under ``MAX_CHANCE`` squared:
the bound a difference passes under when each run's value is tested alone (``_durations``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from reprobox.runspecific._durations import (
    DURATION_OF_CLOCK,
    MAX_CHANCE,
    MAX_COUNTS,
    NEIGHBOURHOOD,
    RATE_OF_CLOCK,
    UNITS,
    ClockRecord,
    precision,
)

AT_ONE_PLACE = "measured at the same place in its code in both runs"


def explains_pair(
    record_a: ClockRecord, a: float, record_b: ClockRecord, b: float, counts: Sequence[int] = ()
) -> str | None:
    """Which figure both numbers are of their own run's clock at one place (a duration in some unit, or a
    given count over a duration), where that is no chance; None otherwise."""
    if not all(isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in (a, b)):
        return None
    durations_a, durations_b = _aligned(record_a, record_b)
    if not durations_a.size:
        return None
    (centre_a, shown_a, width_a), (centre_b, shown_b, width_b) = _shown(a), _shown(b)
    tries: list[tuple[str, Callable[[np.ndarray], np.ndarray], float, float]] = [
        (
            DURATION_OF_CLOCK,
            partial(np.multiply, unit),
            (centre_a - width_a) / unit,
            (centre_a + width_a) / unit,
        )
        for unit in UNITS
    ]
    for count in [c for c in counts if c > 0][:MAX_COUNTS]:  # n / d falls as d grows
        longest = count / (centre_a - width_a) if centre_a > width_a else math.inf
        tries.append((RATE_OF_CLOCK, partial(np.divide, count), count / (centre_a + width_a), longest))
    expected, found = 0.0, None
    for kind, figure, low, high in tries:
        # only the places whose duration in run a makes a figure near a's value (sorted: a slice)
        near = slice(*np.searchsorted(durations_a, [low, high]))
        x, y = figure(durations_a[near]), figure(durations_b[near])
        close = (np.abs(x - centre_a) <= width_a) & (np.abs(y - centre_b) <= width_b)
        # a random value of each run meets a place near both with the share its precision covers
        expected += float(close.sum()) * (shown_a / width_a) * (shown_b / width_b)
        hit = (np.abs(x - centre_a) <= shown_a) & (np.abs(y - centre_b) <= shown_b)
        if found is None and bool(hit.any()):
            found = kind
    return f"{found}, {AT_ONE_PLACE}" if found is not None and expected <= MAX_CHANCE**2 else None


_ALIGNED: dict[tuple[int, int], tuple[ClockRecord, ClockRecord, tuple[np.ndarray, np.ndarray]]] = {}


def _aligned(record_a: ClockRecord, record_b: ClockRecord) -> tuple[np.ndarray, np.ndarray]:
    """Run a's positive durations at every place both runs measured, sorted, and run b's at the same place
    and index beside each (made once per pair of records: a comparison judges many values)."""
    key = (id(record_a), id(record_b))
    found = _ALIGNED.get(key)
    if found is not None and found[0] is record_a and found[1] is record_b:
        return found[2]
    parts_a, parts_b = [np.zeros(0)], [np.zeros(0)]
    for place, durations_a in record_a.places.items():
        durations_b = record_b.places.get(place)
        if durations_b is not None:
            size = min(len(durations_a), len(durations_b))
            parts_a.append(durations_a[:size])
            parts_b.append(durations_b[:size])
    a, b = np.concatenate(parts_a), np.concatenate(parts_b)
    keep = (a > 0) & (b > 0)
    order = np.argsort(a[keep], kind="stable")
    aligned = a[keep][order], b[keep][order]
    if len(_ALIGNED) > 16:  # a few comparisons' pairs of runs
        _ALIGNED.clear()
    _ALIGNED[key] = (record_a, record_b, aligned)
    return aligned


def _shown(value: float) -> tuple[float, float, float]:
    """The value's centre, how far what it shows lets it lie, and its neighbourhood's half width: a whole
    number may be rounded or truncated (``int(n / d)``)."""
    if float(value).is_integer():
        centre, tolerance = value + 0.25, 0.75
    else:
        centre, tolerance = float(value), precision(value)
    return centre, tolerance, NEIGHBOURHOOD * tolerance
