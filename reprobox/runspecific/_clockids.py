"""Ids cut from the run's clock, known by the run's own record: the uuid1s its Python made.

A ``uuid1`` is the clock's count of 100 ns since 1582 (its first 8 hex digits the fastest-changing ones),
a clock sequence and the host's node; the guest records each one the job made, as ``uuid.uuid1``
returned it (``guest.clock_ids``). A token in a value or a file name is such an id when it is written
from one: the whole uuid, with dashes or without, a piece of its hex of at least ``MIN_HEX`` digits, or
its first digits (Ray Tune's trial ids are ``uuid1().hex[:5]`` and a counter, ``00d4b_00003``), also
where a counter follows them in the same run of digits. A first-digits match counts only where it is no
chance: as many digits as make a match by chance of any of the recorded ids below ``MAX_CHANCE``, and
never fewer than ``MIN_PREFIX``. A token of the same shape that no uuid1 of the run begins with (hex a
seeded generator computed, another run's id) stays a real value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CLOCK_ID = "an id the run cut from its clock (a uuid1 it made)"
MIN_PREFIX = 5
MIN_HEX = 8
MAX_CHANCE = 1e-3
_UUID_HEX = re.compile(r"[0-9a-f]{32}")
_UUID = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}(?![0-9A-Za-z])")
_HEX_RUN = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{5,}(?![0-9A-Za-z])")


@dataclass(frozen=True)
class ClockIdRecord:
    """The uuid1s a run made (32 hex digits each) and every first-digits piece of them long enough to be
    no chance."""

    text: str  # the hex of each, newline-separated (a piece is looked up as a substring)
    prefixes: frozenset[str]
    numbers: frozenset[int]
    min_prefix: int

    @classmethod
    def from_readings(cls, readings: Mapping[str, Any]) -> ClockIdRecord | None:
        made = sorted(
            {u for u in readings.get("clock_ids") or [] if isinstance(u, str) and _UUID_HEX.fullmatch(u)}
        )
        if not made:
            return None
        shortest = prefix_length(len(made))
        prefixes = frozenset(u[:n] for u in made for n in range(shortest, len(u) + 1))
        return cls("\n".join(made), prefixes, frozenset(int(u, 16) for u in made), shortest)

    def holds(self, token: str) -> bool:
        """Whether the token is written whole from a uuid1 of the run: the uuid, a long enough piece of
        its hex, or its first digits."""
        plain = token.lower().replace("-", "") if _is_uuid(token) else token.lower()
        if len(plain) >= MIN_HEX and plain in self.text:
            return True
        return plain in self.prefixes

    def leading(self, token: str) -> int:
        """How many of the token's first characters are a uuid1's first digits (0 when none are)."""
        plain = token.lower()
        for end in range(min(len(plain), 32), self.min_prefix - 1, -1):
            if plain[:end] in self.prefixes:
                return end
        return 0

    def holds_number(self, number: int) -> bool:
        """Whether the number is a uuid1 of the run as a whole number (``uuid1().int``)."""
        return number in self.numbers


def prefix_length(count: int) -> int:
    """The fewest first hex digits that match one of ``count`` recorded ids by chance below
    ``MAX_CHANCE`` (16 ** -digits for each), and never fewer than ``MIN_PREFIX``."""
    return max(MIN_PREFIX, math.ceil(math.log(count / MAX_CHANCE, 16)))


def mask_clock_ids(text: str, record: ClockIdRecord, mark: str = "<clock-id>") -> tuple[str, int]:
    """The text with every token written from a uuid1 of the run replaced (a uuid with dashes, a run of
    hex digits, or the first digits of one followed by a counter), and how many."""
    count = 0

    def whole(match: re.Match[str]) -> str:
        nonlocal count
        token = match.group()
        if record.holds(token):
            count += 1
            return mark
        end = record.leading(token)
        if end:
            count += 1
            return mark + token[end:]
        return token

    for pattern in (_UUID, _HEX_RUN):
        text = pattern.sub(whole, text)
    return text, count


def _is_uuid(token: str) -> bool:
    return len(token) == 36 and token.count("-") == 4
