"""XXH64 (seed 0), the hash whose low 32 bits a Zstandard frame's content checksum holds.

The standard library has no xxHash; this follows its specification (xxhash.com, XXH64) with Python's
integers masked to 64 bits, reading the 32-byte stripes' words with one ``struct`` call.
"""

from __future__ import annotations

import struct

_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
_M = (1 << 64) - 1


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _M
    return (((acc << 31) | (acc >> 33)) * _P1) & _M


def _merge(acc: int, lane: int) -> int:
    return ((acc ^ _round(0, lane)) * _P1 + _P4) & _M


def xxh64(data: bytes | bytearray) -> int:
    size = len(data)
    at = 0
    if size >= 32:
        stripes = size // 32
        words = struct.unpack_from(f"<{4 * stripes}Q", data)
        at = 32 * stripes
        p1, p2, m = _P1, _P2, _M
        v1, v2, v3, v4 = (_P1 + _P2) & _M, _P2, 0, (-_P1) & _M
        for a, b, c, d in zip(words[0::4], words[1::4], words[2::4], words[3::4], strict=True):
            v1 = (v1 + a * p2) & m
            v1 = (((v1 << 31) | (v1 >> 33)) * p1) & m
            v2 = (v2 + b * p2) & m
            v2 = (((v2 << 31) | (v2 >> 33)) * p1) & m
            v3 = (v3 + c * p2) & m
            v3 = (((v3 << 31) | (v3 >> 33)) * p1) & m
            v4 = (v4 + d * p2) & m
            v4 = (((v4 << 31) | (v4 >> 33)) * p1) & m
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
        for lane in (v1, v2, v3, v4):
            h = _merge(h, lane)
    else:
        h = _P5
    h = (h + size) & _M
    while at + 8 <= size:
        (word,) = struct.unpack_from("<Q", data, at)
        h = (_rotl(h ^ _round(0, word), 27) * _P1 + _P4) & _M
        at += 8
    if at + 4 <= size:
        (word,) = struct.unpack_from("<I", data, at)
        h = (_rotl(h ^ ((word * _P1) & _M), 23) * _P2 + _P3) & _M
        at += 4
    while at < size:
        h = (_rotl(h ^ ((data[at] * _P5) & _M), 11) * _P1) & _M
        at += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    return h ^ (h >> 32)


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _M
