"""Encodings that test inputs are written in, shared by the fuzz mutators and the hand-made OCDBT files."""

from __future__ import annotations


def varint(value: int) -> bytes:
    """A base-128 varint in its shortest spelling: protobuf's, and OCDBT's."""
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)
