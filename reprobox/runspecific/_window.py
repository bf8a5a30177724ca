"""When one run ran, as its job's clock read it: the window a reading of its clock must lie in, read as
UTC and as the local time in force, and Unix time in s, ms, us or ns tested against it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property

MARGIN_S = 2.0
"""How far outside its window a reading may lie: the records' own stamps are taken around the job."""
DAY = 86400.0


@dataclass(frozen=True)
class Window:
    """When one run ran, as its job's clock read it (Unix seconds), and the local UTC offsets in force."""

    start: float
    end: float
    offsets: tuple[int, ...] = (0,)

    def meets(self, instant: float, span: float = 0.0) -> bool:
        """Whether [instant, instant + span] meets the window widened by the margin."""
        return instant + span >= self.start - MARGIN_S and instant <= self.end + MARGIN_S

    @cached_property
    def decoded(self) -> dict[tuple[str, str], list[tuple[int, int]]]:
        """Tokens already decoded against this window (logs repeat them)."""
        return {}

    @cached_property
    def zones(self) -> tuple[int, ...]:
        """UTC and the local offsets: how a reading without a zone may have been written."""
        return tuple(sorted({0, *self.offsets}))

    @cached_property
    def year_span(self) -> tuple[int, int]:
        years = self.years()
        return min(years), max(years)

    def meets_wall(self, naive: float, span: float, zone: int | None) -> bool:
        """A wall-clock reading (seconds as if UTC): in its own zone, or in UTC or local time."""
        zones = (zone,) if zone is not None else self.zones
        return any(self.meets(naive - z, span) for z in zones)

    def meets_time_of_day(self, seconds: float, span: float) -> bool:
        """A time of day with no date: some day of the window (UTC or local) holds it."""
        for z in {0, *self.offsets}:
            low, high = self.start + z - MARGIN_S, self.end + z + MARGIN_S
            if high - low >= DAY:
                return True
            first = math.floor(low / DAY)
            if any(
                low <= day * DAY + seconds + span and day * DAY + seconds <= high
                for day in (first, first + 1)
            ):
                return True
        return False

    def years(self) -> set[int]:
        """The calendar years the window touches (for readings that name no year)."""
        instants = [t + z for t in (self.start, self.end) for z in {0, *self.offsets}]
        return {datetime.fromtimestamp(t, timezone.utc).year for t in instants}


def is_reading(number: float, window: Window) -> bool:
    """A number that is Unix time in s, ms, us or ns inside the window (``time.time_ns()``)."""
    if isinstance(number, bool) or not math.isfinite(number) or number <= 0:
        return False
    whole = float(number).is_integer()
    for unit in (1.0, 1e3, 1e6, 1e9):
        if window.meets(number / unit, 1.0 / unit if whole else 0.0):
            return True
    return False


def window_of(start: float | None, end: float | None, offsets: tuple[int, ...] = (0,)) -> Window | None:
    """The window between two instants, or None when either is unknown."""
    if start is None or end is None or end < start:
        return None
    return Window(start, end, tuple(sorted(set(offsets))) or (0,))
