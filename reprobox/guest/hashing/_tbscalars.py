"""The scalar events ``SummaryWriter.add_scalar`` writes, read straight from their bytes.

A long run's event file is mostly scalars, one event each, up to millions; parsed field by field
(``_protowire``) each costs tens of microseconds, and the file's CPU budget runs out. Those events have a
few fixed shapes, their bytes differing only in the clock, the step, the tag and the number:

- ``add_scalar``: Event{wall_time 1, step 2, summary 5{value 1{tag 1, simple_value 2}}}
- ``add_scalar(new_style=True)``: the value holds tensor 8{dtype 1 = DT_FLOAT, float_val 5 packed}
  (``double_precision=True``: dtype DT_DOUBLE, double_val 6 packed) and metadata 9{plugin_data 1
  {plugin_name 1 = "scalars"}}, written with every event.

The step is absent at step 0 (proto3 leaves out zeros). A record is read here only when its bytes are
exactly one of these shapes, each field once, in that order, each length one byte; its names and values
are then exactly those the generic reader (``_tensorboard._event``) gives it. Anything else, however
close, is left to that reader. What a tag's bytes were checked to be is kept (by the bytes from the step
to the number), so each further event of the tag is one look-up.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from reprobox.guest.hashing._bounds import check_cpu_budget
from reprobox.guest.hashing._logvalues import LogValues, sha256_hex
from reprobox.guest.hashing._protowire import WireError, read_varint, signed64

MAX_KNOWN_TAGS = 4096
"""Tags whose bytes are remembered; a file of more distinct tags has the rest checked event by event."""

_SHORTEST = 20  # wall_time (9 bytes), the summary's three keys and lengths (6), simple_value (5)
_WALL_TIME_KEY, _STEP_KEY, _SIMPLE_VALUE_KEY = 0x09, 0x10, 0x15
_WALL_TIME = struct.Struct("<d").unpack_from
_HEADER = struct.Struct("<BdBBBB")  # wall_time's key and value, then the step's key and three bytes
_SIMPLE_VALUE = struct.Struct("<Bf")  # simple_value's key and value, the event's last bytes

_SCALARS_METADATA = b"\x0a\x09\x0a\x07scalars"  # SummaryMetadata{plugin_data{plugin_name "scalars"}}
_METADATA_FIELD = b"\x4a\x0b" + _SCALARS_METADATA
_METADATA_SHA256 = sha256_hex(_SCALARS_METADATA)


class _Shape(NamedTuple):
    before: bytes  # the value's bytes between the tag and the number
    width: int  # the number's bytes
    after: bytes  # the value's bytes after the number
    read: struct.Struct
    dtype: str | None  # a tensor's dtype name; None for simple_value


_SIMPLE = _Shape(b"\x15", 4, b"", struct.Struct("<f"), None)
_FLOAT_TENSOR = _Shape(b"\x42\x08\x08\x01\x2a\x04", 4, _METADATA_FIELD, struct.Struct("<f"), "DT_FLOAT")
_DOUBLE_TENSOR = _Shape(b"\x42\x0c\x08\x02\x32\x08", 8, _METADATA_FIELD, struct.Struct("<d"), "DT_DOUBLE")


def _summary_bytes(tag: bytes, shape: _Shape) -> bytes | None:
    """The event's bytes from the summary's key to the number, for this tag; None when a length would
    take two bytes."""
    value_length = 2 + len(tag) + len(shape.before) + shape.width + len(shape.after)
    if value_length + 2 >= 0x80:
        return None
    return bytes((0x2A, value_length + 2, 0x0A, value_length, 0x0A, len(tag))) + tag + shape.before


class ScalarEvents:
    """Reads the scalar events of one file into ``found``, remembering the tags it has checked."""

    def __init__(self, found: LogValues) -> None:
        self._found = found
        self._known: dict[_Shape, dict[bytes, str]] = {_SIMPLE: {}, _FLOAT_TENSOR: {}, _DOUBLE_TENSOR: {}}

    def others(self, data: bytes, spans: Iterable[tuple[int, int]]) -> Iterator[tuple[int, int]]:
        """The records (``data[start:end]``) that are not scalar events, for the generic reader; the
        scalar events' values are added on the way, in order, and the file's CPU budget is checked every
        1024 records."""
        unique, add, known = self._found.unique, self._found.add, self._known[_SIMPLE]
        header_at, simple_value_at = _HEADER.unpack_from, _SIMPLE_VALUE.unpack_from
        for count, (start, end) in enumerate(spans, start=1):
            if not count % 1024:
                check_cpu_budget(f"{count} events read")
            # the commonest case inline: simple_value of a tag already seen, a step under 2**21
            if end - start >= _SHORTEST:
                wall_time_key, wall_time, step_key, low, middle, high = header_at(data, start)
                simple_value_key, number = simple_value_at(data, end - 5)
                if wall_time_key == _WALL_TIME_KEY and simple_value_key == _SIMPLE_VALUE_KEY:
                    if step_key != _STEP_KEY:
                        step, pos = 0, start + 9
                    elif low < 0x80:
                        step, pos = low, start + 11
                    elif middle < 0x80:
                        step, pos = (low & 0x7F) | middle << 7, start + 12
                    elif high < 0x80:
                        step, pos = (low & 0x7F) | (middle & 0x7F) << 7 | high << 14, start + 13
                    else:
                        step, pos = 0, end  # a longer step: read below
                    tag = known.get(data[pos : end - 4])
                    if tag is not None:
                        name = unique(f"{tag}.step_{step}")
                        add(name, number)
                        add(f"{name}.wall_time", wall_time)
                        continue
            if not self._read(data, start, end):
                yield start, end

    def _read(self, data: bytes, start: int, end: int) -> bool:
        """Whether the record ``data[start:end]`` is a scalar event of a known shape; if so its values
        are added (else nothing is, and the generic reader reads it)."""
        if end - start < _SHORTEST or data[start] != _WALL_TIME_KEY:
            return False
        pos = start + 9
        step = 0
        if data[pos] == _STEP_KEY:
            if data[pos + 1] < 0x80:
                step, pos = data[pos + 1], pos + 2
            else:
                try:
                    step, pos = read_varint(data, pos + 1)
                except WireError:
                    return False
                step = signed64(step)
        if data[end - 5] == _SIMPLE_VALUE_KEY:
            shapes: tuple[_Shape, ...] = (_SIMPLE,)
        elif data[end - len(_METADATA_FIELD) : end] == _METADATA_FIELD:
            shapes = (_FLOAT_TENSOR, _DOUBLE_TENSOR)
        else:
            return False
        for shape in shapes:
            number_at = end - len(shape.after) - shape.width
            tag = self._tag(data[pos:number_at], shape)
            if tag is not None:
                (number,) = shape.read.unpack_from(data, number_at)
                self._add(tag, step, _WALL_TIME(data, start + 1)[0], shape, number)
                return True
        return False

    def _tag(self, summary: bytes, shape: _Shape) -> str | None:
        """The tag, when ``summary`` (the bytes from the summary's key to the number) is the shape's."""
        known = self._known[shape]
        tag = known.get(summary)
        if tag is not None or len(summary) < 6:
            return tag
        tag_bytes = summary[6 : 6 + summary[5]]
        if _summary_bytes(tag_bytes, shape) != summary:
            return None
        try:
            tag = tag_bytes.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if len(known) < MAX_KNOWN_TAGS:
            known[summary] = tag
        return tag

    def _add(self, tag: str, step: int, wall_time: float, shape: _Shape, number: float) -> None:
        found = self._found
        name = found.unique(f"{tag}.step_{step}")
        found.add(name, number)
        if shape.dtype is not None:
            found.add(f"{name}.dtype", shape.dtype)
            found.add(f"{name}.shape", [])
            found.add(f"{name}.plugin", "scalars")
            found.add(f"{name}.metadata_sha256", _METADATA_SHA256)
        found.add(f"{name}.wall_time", wall_time)
