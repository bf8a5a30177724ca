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
    places = [p for p in record_a.places if p in record_b.places]
    if not places:
        return None
    tries: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = [
        (DURATION_OF_CLOCK, partial(np.multiply, unit)) for unit in UNITS
    ]
    tries += [(RATE_OF_CLOCK, partial(np.divide, n)) for n in [c for c in counts if c > 0][:MAX_COUNTS]]
    shown_a, shown_b = _shown(a), _shown(b)
    expected, found = 0.0, None
    for kind, figure in tries:
        for place in places:
            durations_a, durations_b = record_a.places[place], record_b.places[place]
            size = min(len(durations_a), len(durations_b))
            with np.errstate(divide="ignore"):
                x, y = figure(durations_a[:size]), figure(durations_b[:size])
            near = (np.abs(x - shown_a[0]) <= shown_a[2]) & (np.abs(y - shown_b[0]) <= shown_b[2])
            # a random value of each run meets a place near both with the share its precision covers
            expected += float(near.sum()) * (shown_a[1] / shown_a[2]) * (shown_b[1] / shown_b[2])
            hit = (np.abs(x - shown_a[0]) <= shown_a[1]) & (np.abs(y - shown_b[0]) <= shown_b[1])
            if found is None and bool(hit.any()):
                found = kind
    return f"{found}, {AT_ONE_PLACE}" if found is not None and expected <= MAX_CHANCE**2 else None


def _shown(value: float) -> tuple[float, float, float]:
    """The value's centre, how far what it shows lets it lie, and its neighbourhood's half width: a whole
    number may be rounded or truncated (``int(n / d)``)."""
    if float(value).is_integer():
        centre, tolerance = value + 0.25, 0.75
    else:
        centre, tolerance = float(value), precision(value)
    return centre, tolerance, NEIGHBOURHOOD * tolerance
