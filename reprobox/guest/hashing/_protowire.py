"""A small, bounded reader of the protocol buffer wire format, for logging tools' files.

TensorBoard's event files and W&B's run files hold protocol buffers. Depending on TensorFlow, the
tensorboard package or wandb to read them would tie the guest and the controller to those stacks, and
their parsers were not written for files a stranger planted. This reader knows the wire format alone
(varint, 64-bit, length-delimited, 32-bit; packed repeated fields) and the callers know the schema: a
message is parsed only when a caller asks for a field it knows to be one, so nesting is as deep as the
schema and no deeper, whatever the bytes say. Every length is checked against the bytes that are left;
groups (wire types 3 and 4, deprecated since proto2) are refused. Anything wrong is a ``WireError``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from reprobox.guest.hashing._bounds import OverLimit

VARINT, I64, LEN, I32 = 0, 1, 2, 5

MAX_MESSAGE_FIELDS = 100_000
"""Fields in one message, repeated ones included: a logged event or record holds tens (repeated numbers
are packed into one field), and a message of millions of two-byte fields would cost a hundred times its
bytes once parsed."""
_MAX_VARINT_BYTES = 10
_WIRE_NAMES = {VARINT: "varint", I64: "64-bit", LEN: "length-delimited", I32: "32-bit"}


class WireError(ValueError):
    """The bytes are not a protocol buffer of the expected shape."""


Buffer = bytes | memoryview


def read_varint(data: Buffer, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it."""
    result = shift = 0
    size = len(data)
    for _ in range(_MAX_VARINT_BYTES):
        if pos >= size:
            raise WireError("a varint runs past the end of the message")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & 0xFFFF_FFFF_FFFF_FFFF, pos
        shift += 7
    raise WireError("a varint runs over 10 bytes")


def signed64(value: int) -> int:
    """A varint read as int64 (or int32: negative int32 values are written sign-extended to 64 bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True, slots=True)
class Field:
    number: int
    wire: int
    value: int | memoryview  # varint: the number; other wire types: their bytes
    start: int  # where the field's key begins in the message, and where its value ends
    end: int

    def integer(self) -> int:
        if not isinstance(self.value, int):
            raise WireError(f"field {self.number} is not a varint")
        return self.value

    def payload(self) -> memoryview:
        if isinstance(self.value, int):
            raise WireError(f"field {self.number} is a varint, not bytes")
        return self.value


def fields(data: Buffer) -> Iterator[Field]:
    """The fields of one message in order, each length checked against the bytes left."""
    view = memoryview(data)
    pos, size = 0, len(view)
    while pos < size:
        start = pos
        key, pos = read_varint(view, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {start}")
        value: int | memoryview
        if wire == VARINT:
            value, pos = read_varint(view, pos)
        elif wire in (I64, I32):
            width = 8 if wire == I64 else 4
            if size - pos < width:
                raise WireError(f"field {number} is cut short at byte {pos}")
            value, pos = view[pos : pos + width], pos + width
        elif wire == LEN:
            length, pos = read_varint(view, pos)
            if length > size - pos:
                raise WireError(f"field {number} claims {length} bytes, more than the {size - pos} left")
            value, pos = view[pos : pos + length], pos + length
        else:
            raise WireError(f"field {number} has wire type {wire} (groups and unknown types are refused)")
        yield Field(number, wire, value, start, pos)


class Message:
    """One parsed message: each field's occurrences, read by number with the type the schema gives."""

    def __init__(self, data: Buffer) -> None:
        self.data = memoryview(data)
        self.by_number: dict[int, list[Field]] = {}
        for count, field in enumerate(fields(self.data), start=1):
            if count > MAX_MESSAGE_FIELDS:  # counted as parsed: each costs a few hundred bytes held
                raise OverLimit(f"a message holds more than the limit of {MAX_MESSAGE_FIELDS} fields")
            self.by_number.setdefault(field.number, []).append(field)

    def has(self, number: int) -> bool:
        return number in self.by_number

    def numbers(self) -> list[int]:
        return list(self.by_number)

    def _last(self, number: int, wire: int) -> Field | None:
        found = self.by_number.get(number)
        if not found:
            return None
        field = found[-1]  # proto3: the last occurrence of a singular field wins
        _expect(field, wire)
        return field

    def varint(self, number: int) -> int:
        field = self._last(number, VARINT)
        return 0 if field is None else field.integer()

    def int64(self, number: int) -> int:
        return signed64(self.varint(number))

    def double(self, number: int) -> float:
        field = self._last(number, I64)
        return 0.0 if field is None else float(struct.unpack("<d", field.payload())[0])

    def float32(self, number: int) -> float:
        field = self._last(number, I32)
        return 0.0 if field is None else float(struct.unpack("<f", field.payload())[0])

    def raw(self, number: int) -> bytes:
        field = self._last(number, LEN)
        return b"" if field is None else bytes(field.payload())

    def string(self, number: int) -> str:
        return text(self.raw(number), number)

    def message(self, number: int) -> Message | None:
        field = self._last(number, LEN)
        return None if field is None else Message(field.payload())

    def messages(self, number: int) -> list[Message]:
        return [Message(b) for b in self.repeated_raw(number)]

    def repeated_raw(self, number: int) -> list[bytes]:
        found = self.by_number.get(number, [])
        for field in found:
            _expect(field, LEN)
        return [bytes(f.payload()) for f in found]

    def strings(self, number: int) -> list[str]:
        return [text(b, number) for b in self.repeated_raw(number)]

    def _fixed(self, number: int, wire: int, code: str) -> list[float]:
        """A repeated double or float field, packed or not (writers may use either; readers take both)."""
        width = struct.calcsize(code)
        pieces: list[memoryview] = []
        for field in self.by_number.get(number, []):
            if field.wire not in (wire, LEN):
                _expect(field, wire)
            payload = field.payload()
            if field.wire == LEN and len(payload) % width:
                raise WireError(
                    f"packed field {number} holds {len(payload)} bytes, "
                    f"not a whole number of {width}-byte values"
                )
            pieces.append(payload)
        return [float(v) for piece in pieces for (v,) in struct.iter_unpack(code, piece)]

    def doubles(self, number: int) -> list[float]:
        return self._fixed(number, I64, "<d")

    def floats(self, number: int) -> list[float]:
        return self._fixed(number, I32, "<f")

    def varints(self, number: int) -> list[int]:
        """A repeated varint field, packed or not."""
        values: list[int] = []
        for field in self.by_number.get(number, []):
            if field.wire == VARINT:
                values.append(field.integer())
                continue
            _expect(field, LEN)
            payload, pos = field.payload(), 0
            while pos < len(payload):
                value, pos = read_varint(payload, pos)
                values.append(value)
        return values

    def without(self, *numbers: int) -> bytes:
        """The message's bytes less the given fields (a digest that ignores, say, a writer's id)."""
        kept = [f for found in self.by_number.values() for f in found if f.number not in numbers]
        return b"".join(bytes(self.data[f.start : f.end]) for f in sorted(kept, key=lambda f: f.start))


def _expect(field: Field, wire: int) -> None:
    if field.wire != wire:
        raise WireError(
            f"field {field.number} is {_WIRE_NAMES.get(field.wire, field.wire)}, "
            f"not the {_WIRE_NAMES.get(wire, wire)} value the schema gives it"
        )


def text(raw: bytes, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise WireError(f"string field {number} is not UTF-8") from None
