"""Means, sums and spreads of durations the run measured in a row at one place in its code, known by the
record of its clocks.

A trainer that times each fold or epoch the same way (``fit_time = time.time() - start_time`` in one
loop) leaves in the record a series: at one call site, each reading minus the latest earlier reading of
another site, in order. What it saves is often not one of those durations but a figure of several in a
row: scikit-learn's ``cv_results_`` holds the mean and standard deviation of each candidate's five fold
times (``mean_fit_time``, ``std_fit_time``), a trainer's summary the sum of its epochs' times. So for every
series the figures of every window of consecutive durations (``2 <= k <= MAX_WINDOW``, and the whole
series) are candidates: the mean, the sum, and the standard deviation (over ``k`` and over ``k - 1``).

A figure counts only where it is no chance, as a single duration does (``_durations``): within its
precision some candidate meets it, and candidates cover at most ``MAX_CHANCE`` of its neighbourhood. A
number written with all its digits (an array in a checkpoint, a float in JSON or CSV) meets one candidate
exactly or none; a rounded one meets many and is not explained this way. Nothing here is ever
"untestable": a figure the record does not show to the last digit stays a difference, so a number drawn
from a seeded generator, or from the OS's entropy and named ``fit_time``, is never excused by it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SERIES_MEAN = "a mean of durations the run's own clock measured in a row at one place in its code"
SERIES_SUM = "a sum of durations the run's own clock measured in a row at one place in its code"
SERIES_SPREAD = (
    "a standard deviation of durations the run's own clock measured in a row at one place in its code"
)
KINDS = (SERIES_MEAN, SERIES_SUM, SERIES_SPREAD, SERIES_SPREAD)
MAX_WINDOW = 64
"""The longest run of consecutive durations whose figures are candidates (folds, epochs of a summary);
a whole series longer than this is a candidate too."""
MAX_FIGURES = 1 << 20
"""Candidates kept per run (each value is tested against all of them); past it the rest are not made,
which only leaves some figures unexplained."""
_EPS = float(np.finfo(np.float64).eps)
_BLOCK = 1 << 13  # windows worked out at once: a block of 64-long windows is 4 MiB
_SAFETY = 4.0  # rounding of sums and square roots differs with the order a library sums in


def duration_series(
    sites: Sequence[object], values: Sequence[object], limit: int
) -> tuple[list[list[float | int]], bool]:
    """Per pair of call sites (a reading's own, the earlier one's) the differences in reading order: each
    reading minus the latest earlier reading of every site; at most ``limit`` differences in all, and
    whether the bound cut some off."""
    series, cut = duration_places(sites, values, limit)
    return list(series.values()), cut


def duration_places(
    sites: Sequence[object], values: Sequence[object], limit: int
) -> tuple[dict[tuple[object, object], list[float | int]], bool]:
    """``duration_series`` keyed by its pair of sites (the reading's, the earlier one's)."""
    latest: dict[object, float | int] = {}
    series: dict[tuple[object, object], list[float | int]] = {}
    total = 0
    for site, value in zip(sites, values, strict=False):
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        for earlier_site, earlier in latest.items():
            if total >= limit:
                return series, True
            series.setdefault((site, earlier_site), []).append(value - earlier)
            total += 1
        latest[site] = value
    return series, False


@dataclass(frozen=True)
class Chance:
    """How a match is judged no chance (``_durations`` owns the figures): the units a number may be
    written in, the neighbourhood counted in multiples of its precision, the largest share of it that
    candidates may cover."""

    units: tuple[float, ...]
    neighbourhood: float
    most: float


@dataclass(frozen=True)
class SeriesFigures:
    """The candidate figures of one run, sorted, each with how far rounding may have moved it."""

    values: np.ndarray
    tolerances: np.ndarray
    kinds: np.ndarray  # index into KINDS
    reach: float  # the largest tolerance: how far around a value to look for one that meets it

    @classmethod
    def of(cls, series: Sequence[np.ndarray]) -> SeriesFigures:
        """From each series of durations (seconds, in order)."""
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        room = MAX_FIGURES // len(KINDS)  # windows; each gives one figure of every kind
        arrays = [np.asarray(durations, dtype=np.float64) for durations in series]
        longest = max((len(x) for x in arrays), default=0)
        # the shortest windows of every series first (folds, a few epochs), the whole of a long one last
        lengths = [*((k, False) for k in range(2, min(longest, MAX_WINDOW) + 1)), (0, True)]
        for k, whole in lengths:
            for x in arrays:
                size = len(x) if whole else k
                if room <= 0 or size < 2 or size > len(x) or (whole and size <= MAX_WINDOW):
                    continue
                usable = x[: min(len(x), room + size - 1)]  # only the windows the bound leaves room for
                parts.append(_window_figures(usable, size))
                room -= len(usable) - size + 1
        if not parts:
            empty = np.zeros(0)
            return cls(empty, empty, np.zeros(0, dtype=np.int8), 0.0)
        values = np.concatenate([p[0] for p in parts])
        tolerances = np.concatenate([p[1] for p in parts])
        kinds = np.concatenate([p[2] for p in parts])
        keep = np.isfinite(values) & (values > 0)
        values, tolerances, kinds = values[keep], tolerances[keep], kinds[keep]
        order = np.argsort(values, kind="stable")
        values, tolerances, kinds = values[order], tolerances[order], kinds[order]
        return cls(values, tolerances, kinds, float(tolerances.max(initial=0.0)))

    def explains(self, value: float, precision: float, chance: Chance) -> str | None:
        """Which figure of a series the number is (in any of the chance's units), where meeting it is no
        chance."""
        if not self.values.size or not math.isfinite(value) or value <= 0:
            return None
        for unit in chance.units:
            target, shown = value / unit, precision / unit
            reach = shown + self.reach
            low = int(np.searchsorted(self.values, target - reach, side="left"))
            high = int(np.searchsorted(self.values, target + reach, side="right"))
            near = slice(low, high)
            hits = np.abs(self.values[near] - target) <= self.tolerances[near] + shown
            if not np.any(hits):
                continue
            best = low + int(np.argmax(hits))
            half = self.tolerances[best] + shown
            width = chance.neighbourhood * half
            around_low, around_high = np.searchsorted(self.values, [target - width, target + width])
            around = self.values[around_low:around_high]
            covered = 2 * half + float(np.minimum(np.diff(around), 2 * half).sum())
            if covered / (2 * width) <= chance.most:
                return KINDS[int(self.kinds[best])]
        return None


def _window_figures(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, sum and both standard deviations of every window of ``k`` consecutive durations, with the
    rounding a library's own summation may differ by (worked out a block of windows at a time)."""
    all_windows = np.lib.stride_tricks.sliding_window_view(x, k)
    sums, magnitudes, squares = [], [], []
    for start in range(0, len(all_windows), _BLOCK):
        windows = all_windows[start : start + _BLOCK]
        block_sums = windows.sum(axis=1)
        sums.append(block_sums)
        magnitudes.append(np.abs(windows).sum(axis=1) / k)
        squares.append(((windows - (block_sums / k)[:, None]) ** 2).sum(axis=1))
    total, magnitude, square = np.concatenate(sums), np.concatenate(magnitudes), np.concatenate(squares)
    means = total / k
    spread = np.sqrt(square / k)
    sample = np.sqrt(square / (k - 1))
    slack = _SAFETY * (k + 2) * _EPS
    values = np.concatenate([means, total, spread, sample])
    tolerances = np.concatenate(
        [slack * magnitude, slack * k * magnitude, slack * (magnitude + spread), slack * (magnitude + sample)]
    )
    kinds = np.repeat(np.arange(len(KINDS), dtype=np.int8), len(means))
    return values, tolerances, kinds
