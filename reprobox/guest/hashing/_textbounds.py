"""A text file's values counted as it is read, so that one over the value limit stops before it fills memory.

``json.loads`` and ``csv`` build every value of what they are given: a 64 MiB file of ``0,`` or ``{},``
is 20 to 30 million Python objects, gigabytes, long before the flattened values could be counted. So the
text readers (``_text``) count first: CSV and JSON Lines line by line, each line's cells or entries
before the next is read; one JSON document from its text before ``json.loads`` sees it. The count is of
entries (array elements and object members, each preamble line, each CSV cell): a named value is at
least one of them, so the count never undercounts a file's values, and each entry costs a bounded
number of objects, so the count bounds what parsing builds. A file whose count passes
``MAX_TEXT_VALUES`` is refused (``OverLimit``, naming the limit).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from reprobox.guest.hashing import _bounds
from reprobox.guest.hashing._bounds import OverLimit, check_cpu_budget, size_text

_STRUCTURE = (b",", b"[", b"{")
"""Each entry of a JSON text follows one of these (a ``[`` or ``{`` opens a container's first entry)."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
"""A JSON string, escapes included: what the exact count cuts out before counting."""

_CPU_CHECK_EVERY = 8192  # lines between two looks at the file's CPU budget


MAX_TEXT_VALUES = 1_000_000
"""The entries one text file may hold: half the value limit of other readers (``_bounds.MAX_VALUES``).

A text file's values are read whole and digested by name, and each costs about 400 bytes on its way
(its name, its value, its digest, their slots in the lists and dicts that carry them): 2,000,000
distinct ones take the reading process past 512 MiB, 1,000,000 stay near 300 MiB. Genuine files are
far below: a Hugging Face ``trainer_state.json`` of 50,000 logged steps holds about 300,000 entries.
"""


def text_value_limit() -> int:
    """The entries one text file may hold: ``MAX_TEXT_VALUES``, or the value limit of every reader
    (``_bounds.MAX_VALUES``) where that is lower."""
    return min(MAX_TEXT_VALUES, _bounds.MAX_VALUES)


def json_entries(raw: bytes) -> int:
    """An upper bound of the entries a JSON text holds, at C speed: the ``,``, ``[`` and ``{`` in it.

    Those inside strings count too unless the count is over the limit; then the strings are cut out and
    the count made again, when there are few enough of them for that to be quick (every string is a key
    or an entry, so a text of more than twice the limit of strings is over it anyway).
    """
    count = _structure(raw)
    limit = text_value_limit()
    if count > limit and raw.count(b'"') <= 4 * limit + 2:
        count = _structure(_STRING.sub(b"", raw))
    return max(count, 1)


def _structure(raw: bytes) -> int:
    return sum(raw.count(mark) for mark in _STRUCTURE)


def line_entries(line: str) -> int:
    """An upper bound of the entries of one JSON Lines line, or of the JSON after a CSV's ``#``: its
    ``,``, ``[`` and ``{``, those inside strings too (at least 1: the line is one entry of the file)."""
    return max(1, line.count(",") + line.count("[") + line.count("{"))


def csv_cells(line: str, delimiter: str = ",") -> int:
    """An upper bound of the cells one line of a CSV adds: its delimiters and one (a quoted one counts)."""
    return line.count(delimiter) + 1


@dataclass
class EntryCount:
    """The running count of one file's entries; ``add`` refuses the file once it passes the limit."""

    limit: int
    total: int = 0

    def add(self, entries: int) -> None:
        self.total += entries
        if self.total > self.limit:
            raise OverLimit(f"it holds more than the limit of {self.limit} values")


def file_count() -> EntryCount:
    return EntryCount(text_value_limit())


def counted_lines(lines: Iterator[str], count: EntryCount, delimiter: str = ",") -> Iterator[str]:
    """CSV lines, each one's cells counted before the CSV reader parses it."""
    for line in lines:
        count.add(csv_cells(line, delimiter))
        yield line


def lines_of(handle: BinaryIO) -> Iterator[str]:
    """A file's lines, each with its ending, decoded as UTF-8 one at a time (``\\n`` never occurs
    inside a UTF-8 sequence, so a file decodes line by line exactly as it does whole)."""
    for number, line in enumerate(handle, 1):
        if number % _CPU_CHECK_EVERY == 0:
            check_cpu_budget(f"{number} lines read")
        yield decoded(line)


MAX_DECODED_BYTES = 128 << 20
"""The memory one decoded text (a JSON document, a line) may take. Python holds a text in 1, 2 or 4 bytes
a character, as its widest character needs: 64 MiB of ASCII with one emoji is 256 MiB once decoded, and
a string parsed from it as much again."""


def decoded(raw: bytes) -> str:
    """``raw`` decoded as UTF-8, refused when the text takes more than ``MAX_DECODED_BYTES``."""
    text = raw.decode("utf-8")
    if sys.getsizeof(text) > MAX_DECODED_BYTES:
        size = sys.getsizeof(text)
        del text
        raise OverLimit(
            f"its text takes {size_text(size)} once decoded, over the limit of {size_text(MAX_DECODED_BYTES)}"
        )
    return text
