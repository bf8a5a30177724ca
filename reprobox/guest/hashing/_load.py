"""Loading a checkpoint's tensors for numeric comparison, named exactly as hashing names them.

Tensors are read from the file by ``pread`` when they are looked up, never through a memory map
(``_filebytes``): a file cut short while it is compared raises ``FileChanged``, an OSError, rather than
killing the process with SIGBUS, and comparing two checkpoints holds one pair of tensors at a time.
"""

from __future__ import annotations

import functools
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox.errors import UsageError
from reprobox.guest.hashing._bounds import OverLimit, check_in_memory, limit_reason
from reprobox.guest.hashing._canonical import ROOT_NAME, _join, expand_quantized, flatten
from reprobox.guest.hashing._filebytes import FileSpan
from reprobox.guest.hashing._numpy_files import load_npz, npy_span
from reprobox.guest.hashing._pickle import read_pickle
from reprobox.guest.hashing._pickle_arrays import to_torch
from reprobox.guest.hashing._safetensors import read_safetensors_header
from reprobox.guest.hashing._torch_types import SavedTensor

if TYPE_CHECKING:
    import numpy as np
    import torch

Loader = Callable[[], "torch.Tensor"]
"""Reads one tensor from its file, anew on each call."""

Loaded = tuple[Mapping[str, "torch.Tensor"], dict[str, object]]
"""Tensors and plain values by name, named as hashing names them."""


class LazyTensors(Mapping[str, "torch.Tensor"]):
    """A checkpoint's tensors by name, each read from its file when it is looked up: every lookup is a
    fresh tensor that the caller lets go once compared, so no file's tensors are all held at once.

    Names and their order are fixed when the file is listed; a file changed since then raises
    ``FileChanged`` at the lookup. ``keepalive`` is what the files read from need kept (an archive's
    extracted members), released with the mapping.
    """

    def __init__(self, loaders: Mapping[str, Loader], keepalive: object = None) -> None:
        self._loaders = dict(loaders)
        self._keepalive = keepalive

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._loaders[name]()

    def __contains__(self, name: object) -> bool:  # Mapping's own would read the tensor to answer
        return name in self._loaders

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)


def _unique(pairs: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        key, n = name, 1
        while key in result:
            n += 1
            key = f"{name}#{n}"
        result[key] = value
    return result


def _held(tensor: torch.Tensor) -> Loader:
    """A loader for a tensor already in memory (a quantized tensor, an array the pickle held inline)."""
    return lambda: tensor


def _load_torch_tensors(path: Path) -> Loaded:
    """A torch.save file, read by the safe pickle reader as hashing reads it (same names, same bytes)."""
    return _load_pickled_tensors(path, None)


def _load_pickled_tensors(path: Path, why: str | None) -> Loaded:
    """Through the safe pickle reader; ``why`` says why another reader did not read the file."""
    try:
        read = read_pickle(path)
        return _named(read.obj)
    except (ValueError, RecursionError) as exc:
        before = f"{why}, and " if why else ""
        raise UsageError(
            f"{path} cannot be read safely ({before}the safe pickle reader: {limit_reason(exc)}); save plain "
            "tensors with torch.save(model.state_dict()) or safetensors to compare it tensor by tensor"
        ) from None


def _named(obj: object) -> Loaded:
    named_arrays, values = flatten(obj)
    return LazyTensors(_unique(tensor_loaders(named_arrays))), _unique(values)


def tensor_loaders(named_arrays: Sequence[tuple[str, Any]]) -> list[tuple[str, Loader]]:
    """A loader for each tensor ``flatten`` named: one read from its file, or one held in memory."""
    import torch

    loaders: list[tuple[str, Loader]] = []
    for name, value in named_arrays:
        if isinstance(value, SavedTensor):
            loaders.append((name, functools.partial(to_torch, value)))  # read by pread at each call
        elif isinstance(value, torch.Tensor):
            loaders.extend((part, _held(tensor)) for part, tensor in expand_quantized(name, value.detach()))
        else:
            loaders.append((name, _held(_numpy_to_torch(value))))
    return loaders


def _check_convertible(dtype: np.dtype[Any], nbytes: int) -> None:
    """OverLimit for an array too large to convert in memory (a big-endian or structured dtype)."""
    little = dtype.newbyteorder("<")
    plain = dtype.fields is None and dtype.kind in "biufc"
    if not plain or dtype != little:  # converted in memory, whole
        check_in_memory(nbytes, "an array", f"to convert from dtype {dtype.str}")


def _numpy_to_torch(array: np.ndarray[Any, Any]) -> torch.Tensor:
    import numpy as np
    import torch

    _check_convertible(array.dtype, int(array.nbytes))
    little = array.dtype.newbyteorder("<")
    if array.dtype.fields is None and array.dtype.kind in "biufc":
        if array.dtype != little:
            array = array.astype(little)
        if not array.flags.writeable:  # torch warns on read-only memory
            array = array.copy()
        return torch.from_numpy(array)
    raw = np.ascontiguousarray(array, dtype=little).view(np.uint8)  # no torch dtype: compare bytes
    return torch.from_numpy(raw.reshape(*array.shape, little.itemsize))


def _load_safetensors_tensors(path: Path) -> Loaded:
    try:
        identity, entries, metadata = read_safetensors_header(path)
    except OverLimit:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not a valid safetensors file ({exc}); write it again") from None
    loaders = [
        (e.name, _safetensors_loader(FileSpan(path, identity, e.start, e.end - e.start), e.dtype, e.shape))
        for e in entries
    ]
    values: dict[str, object] = {}
    if isinstance(metadata, dict):
        values = {_join("__metadata__", k): v for k, v in metadata.items()}
    elif metadata is not None:
        values = {"__metadata__": metadata}
    return LazyTensors(_unique(loaders)), values


def _safetensors_loader(span: FileSpan, dtype: str, shape: tuple[int, ...]) -> Loader:
    """An entry's bytes read by ``pread``, viewed as its torch dtype (its raw bytes where torch has none)."""

    def load() -> torch.Tensor:
        import torch

        raw = torch.from_numpy(span.read())
        torch_dtype = getattr(torch, dtype, None)
        if isinstance(torch_dtype, torch.dtype):
            return raw.view(torch_dtype).reshape(shape)
        return raw

    return load


def _npy_loader(path: Path) -> Loader:
    """An .npy file's array, its header checked now and its bytes read by ``pread`` at each call."""
    (shape, fortran_order, dtype), span = npy_span(path)
    _check_convertible(dtype, span.nbytes)

    def load() -> torch.Tensor:
        array = span.read().view(dtype).reshape(shape, order="F" if fortran_order else "C")
        return _numpy_to_torch(array)

    return load


def _load_numpy_tensors(path: Path) -> Loaded:
    try:
        if path.suffix.lower() == ".npz":  # members decompressed in memory, as hashing checked they may be
            loaders = [(name, _held(_numpy_to_torch(array))) for name, array in load_npz(path)]
        else:
            loaders = [(ROOT_NAME, _npy_loader(path))]
    except OverLimit:
        raise
    except (ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise UsageError(
            f"{path} is not a readable NumPy file ({limit_reason(exc)}); write it again"
        ) from None
    return LazyTensors(_unique(loaders)), {}
