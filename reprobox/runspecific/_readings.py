"""Readings of the run's own monotonic clocks, known by the run's record: a number the job saved that is
one of the readings its Python took of ``time.monotonic`` or ``perf_counter`` (or their ``_ns`` forms).

Such a clock counts from an arbitrary start (the host's boot), so no window can say a value is one of its
readings, as it says of a wall-clock time; the record can, since the guest keeps each reading
(``guest.readings``). Trainers keep them in their state (Ray Tune's ``_earliest_stopping_actor``, a
last-checkpoint time): a value is one when it equals a recorded reading exactly, as a float or an ``_ns``
integer written with all its digits. A reading lies anywhere in a range of thousands of seconds and
shows nine or more digits: a number the training computed meets one by no chance worth counting. The
wall clock's readings are judged by the run's window instead (``_window``), where a reading skipped by
a bound still counts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CLOCK_READING = "a reading of the run's own monotonic clock"
MONOTONIC_CLOCKS = frozenset({"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"})
MIN_DIGITS = 9
"""A number showing fewer significant digits is too coarse to tell a reading from a count."""
_DECIMAL = re.compile(r"(?<![\d.])\d+\.\d+(?![\d.])")


@dataclass(frozen=True)
class ReadingRecord:
    """Every recorded reading of the run's monotonic clocks (seconds as floats, ``_ns`` ones as ints)."""

    values: frozenset[float | int]

    @classmethod
    def from_readings(cls, readings: Mapping[str, Any]) -> ReadingRecord | None:
        found: set[float | int] = set()
        clocks = readings.get("clocks") or []
        for entry in clocks if isinstance(clocks, list) else []:
            if isinstance(entry, Mapping) and entry.get("clock") in MONOTONIC_CLOCKS:
                found.update(v for v in held_values(entry) if type(v) in (int, float) and v > 0)
        return cls(frozenset(found)) if found else None

    def holds(self, number: float) -> bool:
        """Whether the number is one of the readings, written with enough digits to be no chance."""
        return number in self.values and _digits(number) >= MIN_DIGITS


def held_values(entry: Mapping[str, Any]) -> list[Any]:
    """One clock's readings as the script held them: a reading whose call site the code moves by a
    number written there (``default_timer() - 0.00001``, ``guest.clock_offsets``) plus that constant,
    computed as the script computes it (the float or int sum, to the last bit); every other as read."""
    values = list(entry.get("values") or [])
    found = entry.get("site_offsets")
    offsets = found if isinstance(found, Mapping) else {}
    if not offsets:
        return values
    sites = entry.get("sites") or []
    for index, (site, value) in enumerate(zip(sites, values, strict=False)):
        offset = offsets.get(str(site))
        if type(offset) in (int, float) and type(value) in (int, float):
            values[index] = value + offset
    return values


def _digits(number: float) -> int:
    mantissa = repr(number).partition("e")[0]
    return len(mantissa.replace("-", "").replace(".", "").strip("0")) if "." in mantissa else len(mantissa)


def mask_readings(text: str, record: ReadingRecord, mark: str = "<reading>") -> tuple[str, int]:
    """The text with each decimal number that is a recorded reading replaced, and how many."""
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        if record.holds(float(match.group())):
            count += 1
            return mark
        return match.group()

    return _DECIMAL.sub(replace, text), count
