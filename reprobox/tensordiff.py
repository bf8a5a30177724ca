"""How far apart two checkpoints' tensors are, for the tensors whose hashes already differ.

A hash says *that* weights differ; this says by how much: how many elements differ bitwise, the largest
absolute and relative difference and the largest distance in units in the last place (ULP), which tells
rounding noise (a few ULP) from a real divergence. Tensors are read from their files by ``pread`` one
pair at a time, never memory-mapped, and compared a slice at a time, so two large checkpoints need the
memory of their largest pair of tensors; a file cut short or rewritten meanwhile is a sentence naming it
(``EnvironmentProblem``, exit 4), not a process killed by SIGBUS. torch is imported lazily.

Conventions: two NaNs with the same bits are equal; with different bits they differ bitwise but are
0 apart numerically. A NaN against a number, or +inf against -inf, is infinitely far apart
(``max_abs = max_rel = inf``; JSON spells non-finite numbers as strings). ULP distance orders floats by
value through their bit patterns (NaNs fall beyond the infinities, +0 and -0 are 0 apart); it is
reported for floating types only. ``max_rel`` is ``|a-b| / max(|a|, |b|, tiny)`` with ``tiny`` the
smallest normal number of the dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox.errors import EnvironmentProblem
from reprobox.fileio import json_number
from reprobox.guest.hashing import load_tensors, torch_dtype_name
from reprobox.guest.hashing._filebytes import FileChanged

if TYPE_CHECKING:
    import torch

DEFAULT_CHUNK_ELEMENTS = 1 << 21
"""Elements compared at a time: a few tens of MiB of temporaries however large the tensor."""


@dataclass(frozen=True)
class TensorDifference:
    """How one tensor differs between two checkpoints."""

    checkpoint: str
    name: str
    dtype: str
    shape: tuple[int, ...]
    differing: int
    total: int
    max_abs: float | None
    max_rel: float | None
    max_ulp: int | None
    note: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "checkpoint": self.checkpoint,
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "differing": self.differing,
            "total": self.total,
            "max_abs": json_number(self.max_abs),
            "max_rel": json_number(self.max_rel),
            "max_ulp": self.max_ulp,
            "note": self.note,
        }


def _shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ",".join(str(d) for d in shape) + ")"


def diff_checkpoint_files(
    path_a: Path,
    path_b: Path,
    *,
    checkpoint: str,
    names: Iterable[str] | None = None,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
    name_in_b: Callable[[str], str] = str,
) -> list[TensorDifference]:
    """Compare the tensors of two checkpoint files, all of them or only ``names``, in name order, each
    pair read when it is compared and let go after; EnvironmentProblem names a file changed meanwhile.
    ``name_in_b`` gives file b's name for a tensor (an archive member paired under another name)."""
    tensors_a, _ = load_tensors(path_a)
    tensors_b, _ = load_tensors(path_b)
    wanted = sorted(set(names) if names is not None else set(tensors_a) | set(tensors_b))
    try:
        return [
            diff_tensors(
                tensors_a.get(name),
                tensors_b.get(name_in_b(name)),
                checkpoint=checkpoint,
                name=name,
                chunk_elements=chunk_elements,
            )
            for name in wanted
        ]
    except FileChanged as exc:
        raise EnvironmentProblem(
            f"cannot read checkpoint {exc.filename} (it changed while it was compared: cut short, rewritten "
            "or replaced); make sure nothing writes the runs' outputs while they are compared"
        ) from None


def diff_tensors(
    a: torch.Tensor | None,
    b: torch.Tensor | None,
    *,
    checkpoint: str,
    name: str,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> TensorDifference:
    """Compare two tensors (either may be missing), ``chunk_elements`` elements at a time."""
    if a is None or b is None:
        present = a if a is not None else b
        if present is None:
            return TensorDifference(checkpoint, name, "", (), 0, 0, None, None, None, "in neither checkpoint")
        count = present.numel()
        note = "only in A" if a is not None else "only in B"
        return _incomparable(checkpoint, name, present, count, note)
    shape_a, shape_b = tuple(int(d) for d in a.shape), tuple(int(d) for d in b.shape)
    if a.dtype != b.dtype:
        note = f"dtype differs: {torch_dtype_name(a.dtype)} vs {torch_dtype_name(b.dtype)}"
        return _incomparable(checkpoint, name, a, max(a.numel(), b.numel()), note)
    if shape_a != shape_b:
        note = f"shape differs: {_shape_text(shape_a)} vs {_shape_text(shape_b)}"
        return _incomparable(checkpoint, name, a, max(a.numel(), b.numel()), note)
    if chunk_elements < 1:
        raise ValueError("chunk_elements must be at least 1")
    stats = _Stats(_ulp_key(a.dtype) is not None, _numeric(a.dtype))
    flat_a, flat_b = _flat(a), _flat(b)
    for start in range(0, flat_a.numel(), chunk_elements):
        end = start + chunk_elements
        stats.add(flat_a[start:end], flat_b[start:end])
    return TensorDifference(
        checkpoint,
        name,
        torch_dtype_name(a.dtype),
        shape_a,
        stats.differing,
        flat_a.numel(),
        stats.max_abs,
        stats.max_rel,
        stats.max_ulp,
        None,
    )


def _incomparable(
    checkpoint: str, name: str, tensor: torch.Tensor, count: int, note: str
) -> TensorDifference:
    shape = tuple(int(d) for d in tensor.shape)
    return TensorDifference(
        checkpoint, name, torch_dtype_name(tensor.dtype), shape, count, count, None, None, None, note
    )


def _flat(tensor: torch.Tensor) -> torch.Tensor:
    """A 1-D view of the tensor's values (a copy only when its memory is not already in order)."""
    import torch

    tensor = tensor.detach()
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    return tensor.resolve_conj().resolve_neg().reshape(-1)


_SAME_WIDTH_INT = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}
_SIGNED_FLOATS = {
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
}
_NUMERIC_OTHER = {"bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"}


def _ulp_key(dtype: torch.dtype) -> str | None:
    """How a float's bits map to an ordered integer: "signed" (sign-magnitude), "unsigned", or None."""
    name = torch_dtype_name(dtype)
    if name in _SIGNED_FLOATS or name in ("complex64", "complex128"):
        return "signed"
    if name == "float8_e8m0fnu":  # exponent only, no sign bit: the bits are already in order
        return "unsigned"
    return None


def _numeric(dtype: torch.dtype) -> bool:
    name = torch_dtype_name(dtype)
    return _ulp_key(dtype) is not None or name in _NUMERIC_OTHER


def _bits(chunk: torch.Tensor) -> torch.Tensor:
    """The chunk's elements as same-width integers, one row per element (complex: two columns)."""
    import torch

    chunk = torch.view_as_real(chunk) if chunk.is_complex() else chunk.reshape(-1, 1)
    width = chunk.element_size()
    if width in _SAME_WIDTH_INT:
        return chunk.view(getattr(torch, _SAME_WIDTH_INT[width]))
    return chunk.contiguous().view(torch.uint8)  # any other width: compare its bytes


class _Stats:
    """Running totals over chunks of one pair of tensors."""

    def __init__(self, has_ulp: bool, numeric: bool) -> None:
        self.has_ulp = has_ulp
        self.numeric = numeric
        self.differing = 0
        self.max_abs: float | None = 0.0 if numeric else None
        self.max_rel: float | None = 0.0 if numeric else None
        self.max_ulp: int | None = 0 if has_ulp else None

    def add(self, a: torch.Tensor, b: torch.Tensor) -> None:
        bits_a, bits_b = _bits(a), _bits(b)
        mask = (bits_a != bits_b).any(dim=1)
        count = int(mask.sum())
        if count == 0:
            return
        self.differing += count
        if self.numeric:
            self._add_values(a[mask], b[mask])
        if self.has_ulp:
            ulp = _max_ulp(bits_a[mask], bits_b[mask], unsigned=_ulp_key(a.dtype) == "unsigned")
            self.max_ulp = max(self.max_ulp or 0, ulp)

    def _add_values(self, a: torch.Tensor, b: torch.Tensor) -> None:
        import torch

        wide = torch.complex128 if a.is_complex() else torch.float64
        va, vb = a.to(wide), b.to(wide)
        nan_a, nan_b = torch.isnan(va), torch.isnan(vb)
        distance = (va - vb).abs()
        distance = torch.where(nan_a & nan_b, 0.0, distance)
        distance = torch.where(nan_a ^ nan_b, math.inf, distance)
        distance = torch.where(torch.isnan(distance), math.inf, distance)  # +inf against -inf
        tiny = torch.finfo(a.dtype).tiny if a.is_floating_point() or a.is_complex() else 1.0
        scale = torch.maximum(va.abs(), vb.abs()).clamp_min(tiny)
        relative = torch.where(torch.isinf(distance), math.inf, distance / scale)
        relative = torch.where(distance == 0, 0.0, relative)
        self.max_abs = max(self.max_abs or 0.0, float(distance.max()))
        self.max_rel = max(self.max_rel or 0.0, float(relative.max()))


def _order_keys(bits: torch.Tensor, *, unsigned: bool) -> torch.Tensor:
    """Integers in the floats' value order: negative floats (sign bit set) flipped below zero."""
    import torch

    width_bits = 8 * bits.element_size()
    wide = bits.to(torch.int64)
    if unsigned:
        return wide & ((1 << width_bits) - 1)
    magnitude = wide & ((1 << (width_bits - 1)) - 1)
    return torch.where(wide < 0, -magnitude, magnitude)


def _max_ulp(bits_a: torch.Tensor, bits_b: torch.Tensor, *, unsigned: bool) -> int:
    """The largest ULP distance, exact even for float64 where it can exceed the int64 range."""
    key_a = _order_keys(bits_a, unsigned=unsigned).reshape(-1)
    key_b = _order_keys(bits_b, unsigned=unsigned).reshape(-1)
    same_side = (key_a >= 0) == (key_b >= 0)
    best = 0
    if bool(same_side.any()):  # both keys on one side of zero: the difference fits in int64
        best = int((key_a[same_side] - key_b[same_side]).abs().max())
    across = ~same_side
    if bool(across.any()):  # |a| + |b| may not fit: add halves, then put the dropped low bits back
        mag_a, mag_b = key_a[across].abs(), key_b[across].abs()
        halves = (mag_a >> 1) + (mag_b >> 1)
        low = (mag_a & 1) + (mag_b & 1)
        top = int(halves.max())
        best = max(best, 2 * top + int(low[halves == top].max()))
    return best
