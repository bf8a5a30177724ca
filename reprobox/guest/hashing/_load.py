"""Loading a checkpoint's tensors for numeric comparison, named exactly as hashing names them."""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox.errors import UsageError
from reprobox.guest.hashing._bounds import OverLimit, check_in_memory, limit_reason
from reprobox.guest.hashing._canonical import ROOT_NAME, _join, expand_quantized, flatten
from reprobox.guest.hashing._numpy_files import load_npz, open_npy
from reprobox.guest.hashing._pickle import read_pickle
from reprobox.guest.hashing._pickle_arrays import to_torch
from reprobox.guest.hashing._safetensors import read_safetensors_header
from reprobox.guest.hashing._torch_types import SavedTensor

if TYPE_CHECKING:
    import numpy as np
    import torch


def load_tensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, object]]:
    """The tensors (memory-mapped where the format allows) and plain values, named as hashing names them,
    from the reader that hashed the file (``_readers``): archive members too, values files' values too.

    A name that occurs twice gets ``#2``, ``#3`` ... appended in saved order. A file that cannot be read
    within the readers' limits (``_bounds``) raises UsageError naming the file and the limit, never a
    MemoryError, RecursionError or OverflowError.
    """
    try:
        return _load(path)
    except (OverLimit, RecursionError, MemoryError, OverflowError) as exc:
        raise UsageError(
            f"{path} cannot be read safely ({limit_reason(exc)}), so its tensors are not loaded"
        ) from None


def _load(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, object]]:
    from reprobox.guest.hashing import _readers  # the table names this module's loaders

    return _readers.load(path)


def _unique(pairs: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        key, n = name, 1
        while key in result:
            n += 1
            key = f"{name}#{n}"
        result[key] = value
    return result


def _load_torch_tensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, object]]:
    """A torch.save file, read by the safe pickle reader as hashing reads it (same names, same bytes)."""
    return _load_pickled_tensors(path, None)


def _load_pickled_tensors(path: Path, why: str | None) -> tuple[dict[str, torch.Tensor], dict[str, object]]:
    """Through the safe pickle reader; ``why`` says why another reader did not read the file."""
    try:
        read = read_pickle(path, mapped=True)
        return _named(read.obj)
    except (ValueError, RecursionError) as exc:
        before = f"{why}, and " if why else ""
        raise UsageError(
            f"{path} cannot be read safely ({before}the safe pickle reader: {limit_reason(exc)}); save plain "
            "tensors with torch.save(model.state_dict()) or safetensors to compare it tensor by tensor"
        ) from None


def _named(obj: object) -> tuple[dict[str, torch.Tensor], dict[str, object]]:
    import torch

    named_arrays, values = flatten(obj)
    tensors: list[tuple[str, torch.Tensor]] = []
    for name, value in named_arrays:
        if isinstance(value, SavedTensor):
            tensors.append((name, to_torch(value)))
        elif isinstance(value, torch.Tensor):
            tensors.extend(expand_quantized(name, value.detach()))
        else:
            tensors.append((name, _numpy_to_torch(value)))
    return _unique(tensors), _unique(values)


def _numpy_to_torch(array: np.ndarray[Any, Any]) -> torch.Tensor:
    import numpy as np
    import torch

    little = array.dtype.newbyteorder("<")
    plain = array.dtype.fields is None and array.dtype.kind in "biufc"
    if not plain or array.dtype != little:  # converted in memory, whole
        check_in_memory(int(array.nbytes), "an array", f"to convert from dtype {array.dtype.str}")
    if plain:
        if array.dtype != little:
            array = array.astype(little)
        if not array.flags.writeable:  # torch warns on read-only memory; copy-on-write maps avoid this
            array = array.copy()
        return torch.from_numpy(array)
    raw = np.ascontiguousarray(array, dtype=little).view(np.uint8)  # no torch dtype: compare bytes
    return torch.from_numpy(raw.reshape(*array.shape, little.itemsize))


def _load_safetensors_tensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, object]]:
    import numpy as np
    import torch

    try:
        entries, metadata = read_safetensors_header(path)
    except OverLimit:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not a valid safetensors file ({exc}); write it again") from None
    mapped = np.memmap(path, dtype=np.uint8, mode="c")  # copy-on-write: writable for torch, file untouched
    tensors: list[tuple[str, torch.Tensor]] = []
    for e in entries:
        raw = torch.from_numpy(mapped[e.start : e.end])
        torch_dtype = getattr(torch, e.dtype, None)
        if isinstance(torch_dtype, torch.dtype):
            tensors.append((e.name, raw.view(torch_dtype).reshape(e.shape)))
        else:
            tensors.append((e.name, raw))
    values: dict[str, object] = {}
    if isinstance(metadata, dict):
        values = {_join("__metadata__", k): v for k, v in metadata.items()}
    elif metadata is not None:
        values = {"__metadata__": metadata}
    return _unique(tensors), values


def _load_numpy_tensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, object]]:
    try:
        named = load_npz(path) if path.suffix.lower() == ".npz" else [(ROOT_NAME, open_npy(path, "c"))]
    except OverLimit:
        raise
    except (ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise UsageError(
            f"{path} is not a readable NumPy file ({limit_reason(exc)}); write it again"
        ) from None
    return _unique([(name, _numpy_to_torch(array)) for name, array in named]), {}
