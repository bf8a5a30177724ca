"""Random ids and memory addresses known by the run's own record, not by their look.

- An id is run-specific when the job drew it from the OS's entropy: the guest records what ``os.urandom``
  returned (``uuid.uuid4``, ``secrets``, ``random.SystemRandom`` draw through it), and a token in a value
  (a uuid with dashes, hex, base64 or its URL-safe form, of at least ``MIN_HEX`` hex digits or
  ``MIN_BASE64`` characters) or a whole number is one when it is written from such a draw. A token a
  seeded generator computed was never drawn: it stays a real value.
- An address is run-specific when it lies inside the memory map the job's processes recorded at exit
  (``/proc/self/maps``), written in hex (``<... at 0x7f3a...>``) or in decimal (Python's ``id()``). Ranges
  closer than ``ADDRESS_GAP`` are joined: memory a process freed before exit (an arena of small objects)
  lay between the ranges still mapped then.
"""

from __future__ import annotations

import base64
import bisect
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MIN_HEX = 8
MIN_BASE64 = 11
MIN_ADDRESS = 1 << 16  # the first pages are never mapped: a smaller number is no address
MIN_DECIMAL_ADDRESS = 1 << 32  # Python's objects lie in mmap'd arenas, far above a decimal count's range
ADDRESS_GAP = 256 << 20
RANDOM_ID = "a random id the run drew from the OS's entropy"
_UUID = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}(?![0-9A-Za-z])")
_HEX_RUN = re.compile(r"(?<![0-9a-fA-F])[0-9a-fA-F]{8,}(?![0-9a-fA-F])")
_BASE64_RUN = re.compile(r"[0-9A-Za-z_+/-]{11,}")
_SEPARATOR = re.compile(r"[-_/+]")
HEX_ADDRESS = re.compile(r"\b0x([0-9a-fA-F]{4,16})\b")
DECIMAL = re.compile(r"(?<!\d)(?<!\d\.)\d{5,20}(?!\d)(?!\.\d)")
"""A whole number of its own: not inside a longer one, nor either side of a decimal point (``0.12345``),
but before a suffix or after a dot of a name (``140419582628976.npy``, ``cache.140419582628976``)."""


@dataclass(frozen=True)
class DrawRecord:
    """Every way the run's entropy draws may have been written: hex, uuid, base64, whole numbers."""

    text: str  # the written forms, newline-separated (a token is looked up as a substring)
    numbers: frozenset[int]

    @classmethod
    def from_readings(cls, readings: Mapping[str, Any]) -> DrawRecord | None:
        draws = [bytes.fromhex(d) for d in readings.get("draws") or [] if _hex(d)]
        if not draws:
            return None
        forms: list[str] = []
        numbers: set[int] = set()
        for draw in draws:
            forms += _written(draw)
            big, little = int.from_bytes(draw, "big"), int.from_bytes(draw, "little")
            numbers.update({little, *(big >> shift for shift in range(8))})  # getrandbits(k) keeps the top k
        return cls("\n".join(forms), frozenset(n for n in numbers if n >= 1 << 31))

    def holds(self, token: str) -> bool:
        """Whether the token is written from a draw (whole, or a long enough piece of one)."""
        plain = token.replace("-", "") if _is_uuid(token) else token
        if all(c in "0123456789abcdefABCDEF" for c in plain):
            return len(plain) >= MIN_HEX and plain.lower() in self.text
        return len(token) >= MIN_BASE64 and token in self.text

    def holds_number(self, number: int) -> bool:
        return number in self.numbers


def _written(draw: bytes) -> list[str]:
    forms = [draw.hex()]
    if len(draw) == 16:  # uuid4: the version and variant bits set over the draw
        forms.append(uuid.UUID(bytes=draw, version=4).hex)
    for encoded in (base64.b64encode(draw), base64.urlsafe_b64encode(draw)):
        forms.append(encoded.decode("ascii").rstrip("="))
    return forms


def mask_drawn(text: str, record: DrawRecord, mark: str = "<random>") -> tuple[str, int]:
    """The text with every token written from a draw of the run replaced (a uuid, a hex run, a piece of
    base64 between separators, a whole number), and how many."""
    count = 0

    def whole(match: re.Match[str]) -> str:
        nonlocal count
        token = match.group()
        found = record.holds(token) or (token.isdigit() and record.holds_number(int(token)))
        if found:
            count += 1
            return mark
        return token

    def pieces(match: re.Match[str]) -> str:
        nonlocal count
        run = match.group()
        bounds = [0, *(m.end() for m in _SEPARATOR.finditer(run)), len(run) + 1]
        for start in bounds[:-1]:
            for end in reversed(bounds[1:]):
                piece = run[start : end - 1]
                if end - 1 > start and len(piece) >= MIN_BASE64 and record.holds(piece):
                    count += 1
                    return run[:start] + mark + pieces_after(run[end - 1 :])
        return run

    def pieces_after(rest: str) -> str:
        return _BASE64_RUN.sub(pieces, rest) if rest else rest

    for pattern, replace in ((_UUID, whole), (_HEX_RUN, whole), (DECIMAL, whole), (_BASE64_RUN, pieces)):
        text = pattern.sub(replace, text)
    return text, count


@dataclass(frozen=True)
class MemoryMap:
    """The address ranges the run's processes mapped, joined across small gaps, sorted."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]

    @classmethod
    def from_readings(cls, readings: Mapping[str, Any]) -> MemoryMap | None:
        ranges = sorted(
            (r[0], r[1]) for r in readings.get("memory") or [] if isinstance(r, Sequence) and _pair(r)
        )
        joined: list[list[int]] = []
        for start, end in ranges:
            if joined and start <= joined[-1][1] + ADDRESS_GAP:
                joined[-1][1] = max(joined[-1][1], end)
            else:
                joined.append([start, end])
        if not joined:
            return None
        return cls(tuple(r[0] for r in joined), tuple(r[1] for r in joined))

    def holds(self, address: int) -> bool:
        """Whether the address lies inside the map (decimal ones from ``MIN_DECIMAL_ADDRESS`` only)."""
        if address < MIN_ADDRESS:
            return False
        index = bisect.bisect_right(self.starts, address) - 1
        return index >= 0 and address < self.ends[index]


def mask_addresses(text: str, memory: MemoryMap, mark: str, *, decimal: bool) -> tuple[str, int]:
    """The text with each address inside the map replaced (in hex ``0x...``, or with ``decimal`` whole
    numbers from ``MIN_DECIMAL_ADDRESS``: Python's ``id()``), and how many."""
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        number = int(match.group(), 10) if decimal else int(match.group(1), 16)
        if memory.holds(number) and (not decimal or number >= MIN_DECIMAL_ADDRESS):
            count += 1
            return mark
        return match.group()

    return (DECIMAL if decimal else HEX_ADDRESS).sub(replace, text), count


def _hex(value: object) -> bool:
    return isinstance(value, str) and len(value) % 2 == 0 and all(c in "0123456789abcdef" for c in value)


def _is_uuid(token: str) -> bool:
    return len(token) == 36 and token.count("-") == 4


def _pair(value: Sequence[object]) -> bool:
    return len(value) == 2 and all(type(v) is int for v in value)
