"""Reading HDF5 files (h5py's ``.h5``/``.hdf5``, Keras's ``model.weights.h5`` and ``.weights.h5``) with
the standard library and NumPy alone: datasets as tensors, attributes and links as values.

The file's structures are read by this package's own reader (``_hdf5_bytes``, ``_hdf5_format``,
``_hdf5_dense``, ``_hdf5_types``, ``_hdf5_data``, ``_hdf5_fixed_array``, ``_hdf5_tree``), never by
h5py or libhdf5, within the readers' limits: every address inside the file, every structure at most
64 MiB, every count bounded, each object read once, chunks decompressed to no more than their size, the
file's tensors together within ``expansion_budget`` of its size. A feature it does not read (another
filter, a virtual dataset, an external link, a compound type) refuses the file in one sentence naming
the object, and the file is compared by its bytes. Contiguous datasets are hashed from the file by
``pread`` in bounded chunks; chunked ones are assembled in memory when they are hashed or compared.

Its ``Layout`` (``_layout``): each structure parsed is framing (object headers with their times, heaps,
B-tree nodes and chunk indexes as allocated, a heap's free-space manager), each dataset's raw data and
each attribute message content; bytes no structure declares (libhdf5's unused metadata slack, zeros in
the files it writes) and bytes past the superblock's end-of-file address are left unaccounted.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox.errors import UsageError
from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing._arrays import (
    _Array,
    _Content,
    _ContentError,
    _numpy_buffers,
    _refused,
    _unreadable,
)
from reprobox.guest.hashing._bounds import OverLimit, expansion_budget, limit_reason, over_limit, size_text
from reprobox.guest.hashing._canonical import _metadata_digests, numpy_dtype_name
from reprobox.guest.hashing._filebytes import FileIdentity, _opened, pread_chunks
from reprobox.guest.hashing._hdf5_bytes import Source
from reprobox.guest.hashing._hdf5_data import Dataset, read_array
from reprobox.guest.hashing._hdf5_tree import Contents, read_contents
from reprobox.guest.hashing._layout import Layout
from reprobox.guest.hashing._load import LazyTensors, Loaded, _numpy_to_torch, _unique
from reprobox.guest.hashing._numpy_files import _swapped

if TYPE_CHECKING:
    import numpy as np
    import torch

BOUNDS = (
    "addresses inside the file, 64 MiB a structure; messages, links, chunks, attribute elements, B-tree "
    "depth and group nesting counted; each object read once; chunks decompressed to their size, 1 GiB to "
    "assemble one dataset; tensors within 16 times the file"
)


class _Opened:
    """What reading the file's structures found, and what reading its data again needs."""

    def __init__(self, path: Path) -> None:
        with path.open("rb") as f:
            self.identity = FileIdentity.of(f.fileno())
            source = Source(path, f.fileno(), self.identity.size)
            self.contents: Contents = read_contents(source)
        self.layout = Layout.of(self.identity.size, source.content, source.framing)
        self.path = path
        self.base, self.widths = source.base, source.widths
        total = sum(dataset.nbytes for dataset in self.contents.datasets)
        if total > expansion_budget(self.identity.size):
            raise OverLimit(
                f"its datasets hold {size_text(total)}, over the limit of "
                f"{size_text(expansion_budget(self.identity.size))} for a file of its size"
            )

    def array(self, dataset: Dataset) -> np.ndarray[Any, Any]:
        """The dataset's elements in memory, read again by ``pread`` (the file must be unchanged)."""
        with _opened(self.path, self.identity) as fd:
            return read_array(Source(self.path, fd, self.identity.size, self.base, self.widths), dataset)


def _read(path: Path) -> _Opened:
    return _Opened(path)


def plan_hdf5(path: Path) -> _Content:
    try:
        opened = _read(path)
    except (ValueError, UnicodeDecodeError, RecursionError, MemoryError, OverflowError) as exc:
        return _refused("HDF5", exc)
    arrays = [_array(opened, dataset) for dataset in opened.contents.datasets]
    return _Content(
        "hdf5",
        arrays,
        _metadata_digests(opened.contents.values),
        reader="HDF5 reader",
        values_only=not arrays,
        layout=opened.layout,
    )


def _array(opened: _Opened, dataset: Dataset) -> _Array:
    dtype = dataset.datatype.dtype
    assert dtype is not None  # variable-length strings are values
    layout = dataset.layout
    if layout.kind != "contiguous" or layout.address is None:
        return _Array(
            dataset.path,
            numpy_dtype_name(dtype),
            dataset.shape,
            dataset.nbytes,
            lambda budget: _assembled(opened, dataset, budget),
        )
    start = opened.base + layout.address
    swap = dtype if dtype != dtype.newbyteorder("<") else None

    def streamed(_budget: int) -> Iterator[bytes | memoryview]:
        chunks = pread_chunks(opened.path, opened.identity, start, dataset.nbytes, FILE_CHUNK_BYTES)
        return _swapped(chunks, swap)

    return _Array(dataset.path, numpy_dtype_name(dtype), dataset.shape, dataset.nbytes, streamed)


def _assembled(opened: _Opened, dataset: Dataset, budget: int) -> Iterator[memoryview]:
    try:
        array = opened.array(dataset)
    except ValueError as exc:  # a chunk that does not decompress, or would expand past its size
        refusal = limit_reason(exc) if over_limit(exc) else None
        raise _ContentError(_unreadable("HDF5", exc), refusal) from exc
    yield from _numpy_buffers(array, budget)


def load_hdf5(path: Path) -> Loaded:
    """The datasets (each read when looked up) and values, named as ``plan_hdf5`` names them."""
    try:
        opened = _read(path)
    except OverLimit:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not a readable HDF5 file ({limit_reason(exc)})") from None
    loaders = [(d.path, functools.partial(_tensor, opened, d)) for d in opened.contents.datasets]
    return LazyTensors(_unique(loaders)), _unique(opened.contents.values)


def _tensor(opened: _Opened, dataset: Dataset) -> torch.Tensor:
    try:
        return _numpy_to_torch(opened.array(dataset))
    except ValueError as exc:
        raise UsageError(
            f"{opened.path} is not a readable HDF5 file ({dataset.what}: {limit_reason(exc)})"
        ) from None
