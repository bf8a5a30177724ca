"""UBJSON documents (Universal Binary JSON): XGBoost's ``.ubj`` models, and the raw model bytes
``Booster.save_raw(raw_format="ubj")`` returns, which skops stores for a fitted booster as a
``<uuid4>.bin`` member of its zip.

Recognised by a ``.ubj`` or ``.ubjson`` suffix, or by content whatever the name: a document that opens
with ``{`` or ``[`` and whose first bytes parse as UBJSON (an object's first key length, an array's
first marker), where JSON text would have a quote, a digit or a blank. Read from its first byte to its
last (bytes after the document refuse it): objects are values by dotted name (XGBoost's
``learner.gradient_booster.model.trees.0.split_conditions``), arrays of one numeric type given by ``$``
(``[$d#L...``: float32, ``[$l#...``: int32, ``[$U#...``: uint8) are tensors of that dtype, and every
other array is a list of values, as a JSON reader's. Strings are UTF-8, ``C`` an ASCII character, ``H``
(a high-precision number) its digits as text; ``N`` (no-op) is skipped.

The file is untrusted. It is read in memory whole, at most ``MAX_UBJSON_BYTES``; every length and count
is checked against the bytes left before anything is built, containers nest at most ``MAX_NESTING``
levels, keys, scalars and tensors count towards ``MAX_VALUES`` as they are read (a typed array of
``Z``, ``T`` or ``F``, which takes no bytes an element, counts each), an object that lists a key twice
is refused, and the file's CPU budget (``_bounds``) is checked as it is read. Tensors are views of the
bytes read; the file must be unchanged when they are hashed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reprobox.errors import UsageError
from reprobox.guest.hashing import _sniff
from reprobox.guest.hashing._arrays import _arrays_from, _Content, _refused
from reprobox.guest.hashing._bounds import (
    MAX_NESTING,
    MAX_VALUES,
    OverLimit,
    check_cpu_budget,
    limit_reason,
    size_text,
)
from reprobox.guest.hashing._canonical import _metadata_digests, flatten
from reprobox.guest.hashing._filebytes import FileIdentity, check_unchanged
from reprobox.guest.hashing._formats import _checked
from reprobox.guest.hashing._layout import Layout
from reprobox.guest.hashing._load import Loaded, _named

READER_NAME = "UBJSON reader"
SUFFIXES = frozenset({".ubj", ".ubjson"})
MAX_UBJSON_BYTES = 256 << 20
"""Larger documents are compared by their bytes (an XGBoost model of a thousand deep trees is tens of MiB)."""

BOUNDS = (
    f"at most {MAX_UBJSON_BYTES >> 20} MiB, read whole; every length and count within the bytes left; "
    f"{MAX_NESTING} levels; {MAX_VALUES:,} keys, values and tensors, counted as they are read; "
    "a key listed twice refused"
)

_INTEGERS = {b"i": ">i1", b"U": ">u1", b"I": ">i2", b"l": ">i4", b"L": ">i8"}
_NUMBERS = {**_INTEGERS, b"d": ">f4", b"D": ">f8"}
_STRUCTS = {
    marker: struct.Struct(code)
    for marker, code in {
        b"i": ">b",
        b"U": ">B",
        b"I": ">h",
        b"l": ">i",
        b"L": ">q",
        b"d": ">f",
        b"D": ">d",
    }.items()
}
_CONSTANTS: dict[bytes, object] = {b"Z": None, b"T": True, b"F": False}
_TEXTS = {
    b"C": ("a character", "ascii"),
    b"S": ("a string", "utf-8"),
    b"H": ("a high-precision number", "ascii"),
}
_BLANK = b"[]{} \t\r\n"
_CHECK_EVERY = 4096


class _Truncated(ValueError):
    """The bytes end inside the document (while sniffing a file's first bytes: not yet a verdict)."""


@dataclass(frozen=True)
class Document:
    """A parsed document, and what the file was when it was read (its tensors are views of ``data``)."""

    value: object
    identity: FileIdentity
    data: bytes


def is_ubjson(path: Path) -> bool:
    """A ``.ubj``/``.ubjson`` file, or any file whose first bytes parse as a UBJSON container."""
    return _sniff.suffix(path) in SUFFIXES or _sniff.memo(path, "ubjson", _looks_like_ubjson)


def _looks_like_ubjson(path: Path) -> bool:
    head = _sniff.head(path)
    if head[:1] not in (b"{", b"[") or not head.translate(None, _BLANK):
        return False  # ``{}``, ``[[]]``: JSON's too, and nothing to read
    parser = _Parser(head, declared=path.stat().st_size, partial=True)
    try:
        parser.document()
    except _Truncated:
        return True
    except ValueError:  # OverLimit too: a first key longer than the file is no UBJSON
        return False
    return True


def read_document(path: Path) -> Document:
    """The file parsed whole; ValueError (OverLimit for a limit) says why it is not read."""
    with path.open("rb") as f:
        identity = FileIdentity.of(f.fileno())
        if identity.size > MAX_UBJSON_BYTES:
            raise OverLimit(
                f"it holds {size_text(identity.size)}, over the limit of {size_text(MAX_UBJSON_BYTES)}"
            )
        data = f.read(identity.size + 1)
    check_unchanged(path, identity)
    return Document(_Parser(data, declared=len(data)).document(), identity, data)


class _Parser:
    """One pass over the bytes, bounded; ``partial`` for a file's first bytes (``_Truncated`` at their
    end), where ``declared`` is the whole file's size, against which lengths and counts are checked."""

    def __init__(self, data: bytes, *, declared: int, partial: bool = False) -> None:
        self.data = data
        self.view = memoryview(data)
        self.at = 0
        self.declared = declared
        self.partial = partial
        self.read = 0  # keys, values and tensors

    def document(self) -> object:
        value = self.value(0)
        while self.at < len(self.data) and self.data[self.at : self.at + 1] == b"N":
            self.at += 1
        if self.at != len(self.data):
            raise ValueError(f"it holds {len(self.data) - self.at} bytes after the document ends")
        return value

    def take(self, count: int, *, declared: bool = False) -> memoryview:
        """The next ``count`` bytes; a length the file ``declared`` past its end is a limit refused."""
        left = self.declared - self.at
        if count > left and declared:
            raise OverLimit(f"it declares {count} bytes at byte {self.at}, more than the {left} left")
        if count > left:
            raise ValueError(f"it ends inside the document, at byte {self.declared}")
        if self.at + count > len(self.data):
            raise _Truncated("it ends inside the document")
        piece = self.view[self.at : self.at + count]
        self.at += count
        return piece

    def marker(self) -> bytes:
        while True:
            found = bytes(self.take(1))
            if found != b"N":
                return found

    def counted(self, what: str) -> None:
        self.read += 1
        if self.read > MAX_VALUES:
            raise OverLimit(f"it holds more than the limit of {MAX_VALUES} {what}")
        if self.read % _CHECK_EVERY == 0:
            check_cpu_budget(f"{self.read} values read")

    def value(self, depth: int) -> object:
        return self.typed(self.marker(), depth)

    def typed(self, marker: bytes, depth: int) -> object:
        if marker in (b"[", b"{"):
            return self.array(depth + 1) if marker == b"[" else self.object(depth + 1)
        self.counted("values")
        if marker in _CONSTANTS:
            return _CONSTANTS[marker]
        if marker in _STRUCTS:
            layout = _STRUCTS[marker]
            return layout.unpack(self.take(layout.size))[0]
        if marker not in _TEXTS:
            raise ValueError(f"byte {self.at - 1} holds {marker!r}, which is no UBJSON type")
        what, encoding = _TEXTS[marker]
        size = 1 if marker == b"C" else self.length(what)
        return bytes(self.take(size, declared=True)).decode(encoding)

    def length(self, what: str) -> int:
        marker = bytes(self.take(1))
        if marker not in _INTEGERS:
            raise ValueError(f"{what} at byte {self.at - 1} has a length of type {marker!r}, not an integer")
        layout = _STRUCTS[marker]
        found = int(layout.unpack(self.take(layout.size))[0])
        if found < 0:
            raise ValueError(f"{what} at byte {self.at} declares a negative length ({found})")
        return found

    def header(self, what: str) -> tuple[bytes | None, int | None]:
        """A container's optimised header: its type (``$``) and count (``#``), where it gives them."""
        kind: bytes | None = None
        if self.data[self.at : self.at + 1] == b"$":
            self.at += 1
            kind = bytes(self.take(1))
            if kind not in (*_NUMBERS, *_CONSTANTS, b"C", b"S", b"H", b"[", b"{"):
                raise ValueError(f"{what} at byte {self.at - 1} declares elements of type {kind!r}")
            if self.data[self.at : self.at + 1] != b"#" and not self._ends_here():
                raise ValueError(f"{what} at byte {self.at} declares a type but no count")
        if self.data[self.at : self.at + 1] == b"#":
            self.at += 1
            return kind, self.length(what)
        if self._ends_here():
            raise _Truncated("it ends inside a container's header")
        return kind, None

    def _ends_here(self) -> bool:
        return self.partial and self.at >= len(self.data)

    def check_depth(self, depth: int) -> None:
        if depth > MAX_NESTING:
            raise OverLimit(f"it nests deeper than the limit of {MAX_NESTING} levels")

    def array(self, depth: int) -> object:
        self.check_depth(depth)
        kind, count = self.header("an array")
        if count is None:
            items: list[object] = []
            while (found := self.marker()) != b"]":
                items.append(self.typed(found, depth))
            return items
        if kind in _NUMBERS:
            self.counted("values")
            return self.tensor(kind, count)
        if kind in _CONSTANTS:  # elements of no bytes: the count is bounded by the values left
            if count > MAX_VALUES - self.read:
                raise OverLimit(f"an array at byte {self.at} declares {count} elements, over the limit")
            self.read += count
            return [_CONSTANTS[kind]] * count
        if kind == b"C":
            self.counted("values")
            return bytes(self.take(count, declared=True)).decode("ascii")
        self.check_count(count, "an array")
        return [self.typed(kind, depth) if kind else self.value(depth) for _ in range(count)]

    def tensor(self, kind: bytes, count: int) -> Any:
        import numpy as np

        dtype = np.dtype(_NUMBERS[kind])
        if count > (self.declared - self.at) // dtype.itemsize:
            raise OverLimit(f"an array at byte {self.at} declares {count} elements, more than the file holds")
        start = self.at
        self.take(count * dtype.itemsize, declared=True)
        return np.frombuffer(self.data, dtype=dtype, count=count, offset=start) if not self.partial else None

    def check_count(self, count: int, what: str) -> None:
        """Each element takes at least one byte: a count past the bytes left is a lie."""
        if count > self.declared - self.at:
            raise OverLimit(f"{what} at byte {self.at} declares {count} elements, more than the file holds")

    def object(self, depth: int) -> dict[str, object]:
        self.check_depth(depth)
        kind, count = self.header("an object")
        found: dict[str, object] = {}
        if count is not None:
            self.check_count(count, "an object")
        index = 0
        while count is None or index < count:
            if count is None:
                while self.data[self.at : self.at + 1] == b"N":
                    self.at += 1
                if self.data[self.at : self.at + 1] == b"}":
                    self.at += 1
                    break
            key = bytes(self.take(self.length("a key"), declared=True)).decode("utf-8")
            self.counted("values")
            if key in found:
                raise ValueError(f"an object lists the key {key[:80]!r} twice")
            found[key] = self.typed(kind, depth) if kind else self.value(depth)
            index += 1
        return found


def plan_ubjson(path: Path) -> _Content:
    """The document's tensors and values, or its bytes with the reason."""
    try:
        document = read_document(path)
        named_arrays, values = flatten(document.value)
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        return _refused("UBJSON", exc)
    arrays = [
        replace(a, buffers=_checked(path, document.identity, a.buffers)) for a in _arrays_from(named_arrays)
    ]
    return _Content(
        "ubjson",
        arrays,
        _metadata_digests(values),
        keepalive=document,
        reader=READER_NAME,
        values_only=not arrays,
        layout=Layout.whole(document.identity.size),  # parsed from its first byte to its last, or refused
    )


def load_ubjson(path: Path) -> Loaded:
    """The tensors and values, named as ``plan_ubjson`` names them (for comparison)."""
    try:
        document = read_document(path)
    except OverLimit:
        raise
    except ValueError as exc:
        raise UsageError(f"{path} is not a readable UBJSON file ({limit_reason(exc)})") from None
    return _named(document.value)
