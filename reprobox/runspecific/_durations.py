"""Durations and rates known by the run's own record of its clocks, not by their names.

The guest records the readings the job's Python took of its clocks, each with its call site, in order
(``reprobox.guest.readings``): ``time``'s functions, and ``datetime.now``, ``utcnow`` and ``today`` as
microseconds of the epoch (``(end - start).total_seconds()`` of two is a difference of two readings).
A duration is a reading minus the latest earlier reading of some site (``time.time() - start``, where
``start`` is the latest reading taken where ``start`` is set): those differences are the candidates,
each reading taken as the script held it (plus the constant its line adds, ``default_timer() - 1e-05``:
``_readings.held_values``).
A number is

- a duration when it equals a candidate (in s, ms, us or ns) to the digits it shows;
- a rate when it is a whole count over a candidate (steps per second), or the count the value's own name
  gives (``charts/SPS.step_1024``) or a count written beside it (a sentence's) over one, truncated or
  rounded as a script writes it;
- a mean duration when it is a candidate over a whole count;
- a mean, sum or standard deviation of durations measured in a row at one place (``_series``), to the
  digits it shows and where that is no chance (in practice only with all its digits: many such figures
  lie near any rounded number), and never untestable.

With many readings almost any small number is some difference of two, so a match counts only where it is
unlikely by chance: the share of its neighbourhood that candidates cover within its precision (the chance
that a number this precise would meet one at random) must stay under ``MAX_CHANCE``. A number written with
all its digits meets at most one candidate exactly; a rounded one needs a sparse neighbourhood. One too coarse
for that (``int(seconds)``, a rate rounded to units) is ``UNTESTABLE``: the record cannot tell, and only
its name may excuse it, saying so; a value the record can test and does not explain is never excused.
Two runs' values too coarse alone may still be the same figure at the same place in both (``_paired``).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

import numpy as np

from reprobox.runspecific._readings import held_values
from reprobox.runspecific._series import KINDS as SERIES_KINDS_IN_ORDER
from reprobox.runspecific._series import Chance, SeriesFigures, duration_places

MAX_CHANCE = 0.05
"""The largest chance that a number this precise meets a candidate at random, for it to count as
explained; both runs' values must be explained, so a real difference passes for one about 0.25% of the
time at most."""
NEIGHBOURHOOD = 100.0  # the density around a value is counted within this many times its precision
UNITS = (1.0, 1e3, 1e6, 1e9)  # seconds, ms, us, ns
MAX_COUNTS = 4  # whole numbers beside a value tried as its rate's count, at most
MAX_CANDIDATES = 1 << 19  # differences kept per run: each value is tested against all of them
_FULL_DIGITS = 15  # a value shown with this many significant digits is the computed float itself
_ULPS = 8.0
_PER_SECOND = {"_ns": 1e9, "_us": 1e6}  # a clock's unit, by its name's end (datetime's: microseconds)
_STEP = re.compile(r"(?:^|[._/])step_?(\d+)$")
_DECIMAL = re.compile(r"(?<![\d.])\d+\.(\d+)(?:[eE]([-+]?\d+))?(?![\d.])")

DURATION_OF_CLOCK = "a duration of the run's own clock"
RATE_OF_CLOCK = "a rate over the run's own clock"
MEAN_OF_CLOCK = "a mean duration of the run's own clock"
UNTESTABLE = "too coarse for the record of the run's clock to test"
SERIES_KINDS = frozenset(SERIES_KINDS_IN_ORDER)
_CHANCE = Chance(UNITS, NEIGHBOURHOOD, MAX_CHANCE)


@dataclass(frozen=True)
class ClockRecord:
    """The candidate durations of one run (seconds, sorted), the same durations per pair of call sites in
    the order they were measured (``_series``), and whether its record is complete: nothing dropped by a
    bound, no long-lived program of the job that kept no record (a service in Go, a C++ binary), and no
    clock a process could not wrap (``datetime``'s, where the platform refuses)."""

    differences: np.ndarray
    complete: bool
    series: tuple[np.ndarray, ...] = field(default=(), compare=False)
    places: Mapping[str, np.ndarray] = field(default_factory=dict, compare=False)
    """The same series by where they were measured (the clock and both sites' ``file:line``), so that
    two runs' figures can be matched at the same place (``_paired``)."""

    @classmethod
    def from_readings(cls, readings: Mapping[str, Any]) -> ClockRecord | None:
        """From the run facts' ``readings`` (None when the guest recorded no clock reading)."""
        found: list[np.ndarray] = []
        places: dict[str, np.ndarray] = {}
        clocks = readings.get("clocks") or []
        missing = ("dropped", "unrecorded_programs", "unrecorded_clocks")
        complete = not any(readings.get(key) for key in missing)
        total, recorded = 0, False
        for entry in clocks if isinstance(clocks, list) else []:
            if not isinstance(entry, Mapping):
                continue
            recorded = True
            per_second = _PER_SECOND.get(str(entry.get("clock", ""))[-3:], 1.0)
            room = MAX_CANDIDATES - total
            keyed, cut = duration_places(entry.get("sites") or [], held_values(entry), room)
            total += sum(len(s) for s in keyed.values())
            # divided, as a script divides: (t1 - t0) / 1e9, timedelta.total_seconds() (us / 10**6)
            series = {pair: np.asarray(s, dtype=np.float64) / per_second for pair, s in keyed.items()}
            found += series.values()
            names = entry.get("site_names") or []
            for (site, earlier), durations in series.items():
                place = f"{entry.get('clock')}|{_name(names, site)}|{_name(names, earlier)}"
                places[place] = np.concatenate([places[place], durations]) if place in places else durations
            if cut:  # past the bound: what is left is judged by no record alone
                complete = False
                break
        if not recorded:
            return None
        merged = np.unique(np.concatenate([np.zeros(0), *found]))
        return cls(merged[merged > 0], complete, tuple(found), places)

    @cached_property
    def figures(self) -> SeriesFigures:
        """Means, sums and spreads of the durations each place measured in a row (made when first asked)."""
        return SeriesFigures.of(self.series)


def _name(names: Sequence[object], site: object) -> str:
    """A site's ``file:line`` with each file cut to its folder and name: the same place in both runs,
    wherever each run's copy of the code lay."""
    name = str(names[site]) if type(site) is int and 0 <= site < len(names) else "?"
    return " < ".join("/".join(part.rsplit("/", 2)[-2:]) for part in name.split(" < "))


def precision(value: float) -> float:
    """Half a unit of the last digit the value shows (a whole number: 0.5); a few ulps when it shows
    every digit of a float."""
    if isinstance(value, int):
        return 0.5
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    digits = mantissa.replace("-", "").replace(".", "").lstrip("0")
    decimals = len(mantissa.partition(".")[2]) - (int(exponent) if exponent else 0)
    if len(digits) >= _FULL_DIGITS:
        single = np.float32(value)
        if float(single) == value:  # a float32 (TensorBoard's scalars): its own precision
            return float(np.spacing(single))
        return _ULPS * math.ulp(value)
    return max(0.5 * 10.0**-decimals, _ULPS * math.ulp(value))


def explains(
    record: ClockRecord,
    value: object,
    name: str = "",
    kinds: Collection[str] | None = None,
    counts: Sequence[int] = (),
) -> str | None:
    """Which kind of figure of the run's clock the number is (``DURATION_OF_CLOCK``...); ``UNTESTABLE``
    when it is consistent with the record but too coarse for a match to be more than chance; None when
    the record holds no reading it could have come from. ``kinds`` keeps only those readings of it (a
    value whose name says it is a duration is untestable only as a duration, never as some rate).
    ``counts``: the whole numbers written beside it (a sentence's ``17 effective words``), each tried as
    the count of a rate where its name gives none, the chance shared among them."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None
    if value <= 0 or record.differences.size == 0:
        return None
    tolerance = precision(value)
    whole = float(value).is_integer()
    center, spread = (value + 0.25, 0.75) if whole else (value, tolerance)  # int() truncates
    count = count_in(name)
    differences = record.differences
    # Tried in order, the first match names the figure. A value logged at a step is first tried as a
    # rate over that step's count: that reading uses a fact of its own (the count), where a duration in
    # some unit may meet a candidate by chance just as well.
    if count is not None:
        rate_test = partial(_rate, differences, float(value), tolerance, (count,) if count > 0 else ())
    else:
        beside = tuple(c for c in counts if c > 0)[:MAX_COUNTS]
        rate_test = partial(_rate, differences, float(value), tolerance, beside, beside=True)
    rate = (RATE_OF_CLOCK, rate_test)
    durations = [(DURATION_OF_CLOCK, partial(_meets, differences, center / u, spread / u)) for u in UNITS]
    mean = (
        MEAN_OF_CLOCK,
        lambda: _whole_over(differences / value, differences * tolerance / value**2, minimum=2),
    )
    tries: list[tuple[str, Callable[[], bool | None]]] = (
        [rate, *durations, mean] if count is not None else [*durations, rate, mean]
    )
    if kinds is not None:
        tries = [(kind, test) for kind, test in tries if kind in kinds]
    found: list[bool | None] = []
    for kind, test in tries:
        found.append(test())
        if found[-1]:
            return kind
    if kinds is None or SERIES_KINDS.intersection(kinds):  # never untestable: found to the digit, or not
        figure = record.figures.explains(float(value), tolerance, _CHANCE)
        if figure is not None and (kinds is None or figure in kinds):
            return figure
    return UNTESTABLE if None in found else None


def decimals(text: str) -> list[str]:
    """The decimal numbers of a text, in order, as ``mask_durations`` sees them."""
    return [match.group() for match in _DECIMAL.finditer(text)]


def mask_durations(
    text: str, record: ClockRecord, mark: str = "<duration>", *, keep: frozenset[int] = frozenset()
) -> tuple[str, set[str]]:
    """The text with each decimal number that is a duration of the run's clock (to the digits it shows,
    where that is no chance), or a mean, sum or spread of durations it measured in a row (to every digit),
    replaced, and which of those it held: ``epoch 3 took 0.0569s``, a CSV cell ``8.492696021192208e-05``.
    The decimals at the places ``keep`` names (0: the first) are left as they are."""
    found: set[str] = set()
    places = itertools.count()

    def replace(match: re.Match[str]) -> str:
        if next(places) in keep:
            return match.group()
        value = float(match.group())
        shown = len(match.group(1)) - int(match.group(2) or 0)
        tolerance = max(0.5 * 10.0**-shown, _ULPS * math.ulp(value))
        if value > 0 and any(_meets(record.differences, value / u, tolerance / u) for u in UNITS):
            found.add(DURATION_OF_CLOCK)
            return mark
        figure = record.figures.explains(value, tolerance, _CHANCE) if value > 0 else None
        if figure is not None:
            found.add(figure)
            return mark
        return match.group()

    return (_DECIMAL.sub(replace, text) if record.differences.size else text), found


def _meets(differences: np.ndarray, value: float, tolerance: float, most: float = MAX_CHANCE) -> bool | None:
    """True: a candidate within the tolerance, and few enough around it that meeting one is no chance
    (they cover at most ``most`` of its neighbourhood); None: candidates within it, but so many around
    that meeting one is; False: none."""
    tolerance += _ULPS * math.ulp(value)
    low = int(np.searchsorted(differences, value - tolerance, side="left"))
    high = int(np.searchsorted(differences, value + tolerance, side="right"))
    if high <= low:
        return False
    width = NEIGHBOURHOOD * tolerance
    near_low, near_high = np.searchsorted(differences, [value - width, value + width])
    near = differences[near_low:near_high]
    # the share of the neighbourhood a random number this precise would land in: candidates a few
    # microseconds apart (a reading and its neighbour's) cover the same stretch, counted once
    covered = 2 * tolerance + float(np.minimum(np.diff(near), 2 * tolerance).sum())
    return True if covered / (2 * width) <= most else None


def _rate(
    differences: np.ndarray, value: float, tolerance: float, counts: Sequence[int], *, beside: bool = False
) -> bool | None:
    """A count over a candidate: each given count in turn, the chance split among them (so that trying
    several meets one by chance no more often than one); with none given, any whole count. Counts found
    ``beside`` the value (not named by it) may be the wrong ones: where none fits, the value is what any
    whole count makes of it, short of a match (untestable, or refuted)."""
    if not counts:
        return _whole_over(value * differences, differences * tolerance, minimum=1)
    most = MAX_CHANCE / len(counts)
    found: list[bool | None] = []
    for count in counts:
        rates = np.sort(count / differences)
        if value.is_integer():  # int(n / d) or round(n / d): the rate lies within [v - 0.5, v + 1)
            found.append(_meets(rates, value + 0.25, 0.75, most))
        else:
            found.append(_meets(rates, value, tolerance, most))
        if found[-1]:
            return True
    if beside and None not in found:
        return (
            None
            if _whole_over(value * differences, differences * tolerance, minimum=1) is not False
            else False
        )
    return None if None in found else False


def _whole_over(counts: np.ndarray, tolerances: np.ndarray, *, minimum: int) -> bool | None:
    """Some candidate makes a whole count (within its tolerance), and whole counts are rare enough at
    that precision that meeting one is no chance (None where they are not)."""
    tolerances += np.abs(counts) * (_ULPS * 2.3e-16)  # a few ulps of the count (in place: no copies)
    usable = counts >= minimum - 0.5
    off = np.rint(counts)
    np.subtract(counts, off, out=off)
    np.abs(off, out=off)
    if not np.any((off <= tolerances) & usable):
        return False
    chance = np.minimum(1.0, 2 * tolerances[usable])
    return True if float(chance.sum()) <= MAX_CHANCE else None


def count_in(name: str) -> int | None:
    """The count a value's name gives (the step it was logged at: ``charts/SPS.step_1024``)."""
    found = _STEP.search(name)
    return int(found.group(1)) if found else None
