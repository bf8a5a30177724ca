"""Tensors waiting to be hashed: what each digest records, and how a worker gets the tensor's bytes.

Bytes are produced lazily, piece by piece, in the worker that hashes them. A non-contiguous tensor is
copied to contiguous memory at most ``budget`` bytes at a time; the pool passes its
``COPY_BUDGET_BYTES`` as the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing._bounds import limit_reason, over_limit
from reprobox.guest.hashing._canonical import expand_quantized, numpy_dtype_name, torch_dtype_name
from reprobox.guest.hashing._layout import Layout
from reprobox.guest.hashing._loaded import loaded
from reprobox.guest.hashing._torch_types import SavedTensor

if TYPE_CHECKING:
    import numpy as np
    import torch


class _ContentError(Exception):
    """The file's content cannot be read as its format says; it is then hashed as a plain file.

    ``refusal`` is set when a limit refused it (see ``_bounds``): ``reprobox hash`` then exits 2.
    """

    def __init__(self, note: str, refusal: str | None = None) -> None:
        super().__init__(note)
        self.refusal = refusal


Buffers = Callable[[int], Iterator[bytes | memoryview]]
"""An array's bytes in row-major order, given the copy budget in bytes (see ``contiguous_pieces``)."""


@dataclass
class _Array:
    """A tensor waiting to be hashed: what the digest records, and how to get its bytes in a worker."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    buffers: Buffers


@dataclass
class _Content:
    format: str
    arrays: list[_Array] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    note: str | None = None
    keepalive: object = None  # the loaded object the buffers point into
    reader: str = "file bytes"  # what read the content, recorded in the manifest
    refusal: str | None = None  # the limit that refused the content (see ``_bounds``), if one did
    values_only: bool = False  # a file of values alone (JSON, logs): with no tensors, its content is them
    layout: Layout | None = None  # the bytes the reader accounted for (``_layout``); None: it cannot say
    # the files whose reader compares what this file holds (an OCDBT data file's manifests), relative
    # to this file's folder: this file's name and packing are then their layout, not a content
    part_of: tuple[str, ...] = ()


def _opaque(note: str | None, refusal: str | None = None) -> _Content:
    return _Content(format="file", note=note, refusal=refusal)


def _first_sentence(text: str) -> str:
    return text.split(". ", 1)[0].rstrip(".")[:200]


def _unreadable(kind: str, exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = limit_reason(exc) if over_limit(exc) else _first_sentence(lines[0]) if lines else ""
    return (
        f"content not hashed: not a readable {kind} file ({reason or type(exc).__name__}); "
        "the content hash is the file sha256"
    )


def _refused(kind: str, exc: BaseException) -> _Content:
    """The plain-file fallback for a reader's error, marked as refused when a limit refused it."""
    return _opaque(_unreadable(kind, exc), limit_reason(exc) if over_limit(exc) else None)


def contiguous_pieces(
    x: Any,
    *,
    budget: int,
    ready: Callable[[Any], bool],
    materialise: Callable[[Any], Any],
    nbytes: Callable[[Any], int],
) -> Iterator[Any]:
    """Row-major contiguous pieces of ``x`` whose concatenation is ``x``'s bytes; copies stay small.

    A piece that has to be copied holds at most ``budget`` bytes (or one element, if that is larger).
    """
    if ready(x):
        yield x
        return
    size = nbytes(x)
    if len(x.shape) == 0 or size <= budget:
        yield materialise(x)
        return
    rows = int(x.shape[0])
    row_bytes = size // rows
    if row_bytes > budget:
        for i in range(rows):
            yield from contiguous_pieces(
                x[i], budget=budget, ready=ready, materialise=materialise, nbytes=nbytes
            )
        return
    step = budget // row_bytes
    for start in range(0, rows, step):
        yield materialise(x[start : start + step])


def _torch_array(name: str, tensor: torch.Tensor) -> _Array:
    tensor = tensor.detach()
    return _Array(
        name=name,
        dtype=torch_dtype_name(tensor.dtype),
        shape=tuple(int(d) for d in tensor.shape),
        nbytes=tensor.numel() * tensor.element_size(),
        buffers=lambda budget: _torch_buffers(tensor, budget),
    )


def _torch_buffers(tensor: torch.Tensor, budget: int) -> Iterator[memoryview]:
    import torch

    if tensor.device.type == "meta":  # no storage: nothing to hash beyond dtype and shape
        return
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    for piece in contiguous_pieces(
        tensor,
        budget=budget,
        ready=lambda t: t.is_contiguous() and not t.is_conj() and not t.is_neg(),
        materialise=lambda t: t.resolve_conj().resolve_neg().contiguous(),
        nbytes=lambda t: t.numel() * t.element_size(),
    ):
        yield memoryview(piece.reshape(-1).view(torch.uint8).numpy())


def _numpy_array(name: str, array: np.ndarray[Any, Any]) -> _Array:
    return _Array(
        name=name,
        dtype=numpy_dtype_name(array.dtype),
        shape=tuple(int(d) for d in array.shape),
        nbytes=int(array.nbytes),
        buffers=lambda budget: _numpy_buffers(array, budget),
    )


def _numpy_buffers(array: np.ndarray[Any, Any], budget: int) -> Iterator[memoryview]:
    import numpy as np

    little = array.dtype.newbyteorder("<")
    for piece in contiguous_pieces(
        array,
        budget=budget,
        ready=lambda a: bool(a.flags.c_contiguous) and a.dtype == little,
        materialise=lambda a: np.ascontiguousarray(a, dtype=little),
        nbytes=lambda a: int(a.nbytes),
    ):
        yield memoryview(piece.reshape(-1).view(np.uint8))


def _saved_array(name: str, tensor: SavedTensor) -> _Array:
    return _Array(
        name=name,
        dtype=tensor.dtype.name,
        shape=tensor.shape,
        nbytes=tensor.nbytes,
        buffers=lambda budget: _saved_buffers(tensor, budget),
    )


def _saved_buffers(tensor: SavedTensor, budget: int) -> Iterator[bytes | memoryview]:
    """A one-run tensor streamed from the file; any other read (what it spans) now, and let go after."""
    if tensor.stream is not None:  # no NumPy: a checkpoint of plain tensors is hashed without importing it
        yield from tensor.stream.chunks(FILE_CHUNK_BYTES)
        return
    import numpy as np

    values = tensor.values
    if values is None:  # saved without data: nothing to hash beyond dtype and shape
        return
    lazy = tensor.conj or tensor.neg
    for piece in contiguous_pieces(
        values,
        budget=budget,
        ready=lambda a: bool(a.flags.c_contiguous) and not lazy,
        materialise=tensor.resolved,
        nbytes=lambda a: int(a.nbytes),
    ):
        yield memoryview(piece.reshape(-1).view(np.uint8))


def _arrays_from(named: Sequence[tuple[str, Any]]) -> list[_Array]:
    arrays: list[_Array] = []
    torch_module = loaded("torch")
    for name, value in named:
        if isinstance(value, SavedTensor):
            arrays.append(_saved_array(name, value))
        elif torch_module is not None and isinstance(value, torch_module.Tensor):
            arrays.extend(_torch_array(n, t) for n, t in expand_quantized(name, value))
        else:
            arrays.append(_numpy_array(name, value))
    return arrays
