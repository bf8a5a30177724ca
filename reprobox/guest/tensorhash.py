"""A tensor's digest, as the trail and the op log record it.

On CPU a tensor's digest is the sha256 of its bytes. On a GPU it is computed on the device (a
position-weighted 64-bit checksum of the raw bits), so only a few bytes per tensor cross to the host.
A parameter's trail entry adds its sum and L2 norm (float64), there to show how far two runs drift
apart, not to decide equality.
"""

from __future__ import annotations

import hashlib
import math
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

NUMPY_FLOATS = ("float32", "float64", "float16")


def parameter_digest(torch_module: ModuleType, tensor: torch.Tensor) -> list[Any]:
    """[digest, sum, L2 norm] of one parameter; on CPU through a zero-copy NumPy view (fewer torch calls)."""
    data = tensor.detach()
    if data.numel() == 0:
        return [hashlib.sha256(b"").hexdigest(), 0.0, 0.0]
    if data.device.type == "cpu" and str(data.dtype).removeprefix("torch.") in NUMPY_FLOATS:
        values = (data if data.is_contiguous() else data.contiguous()).numpy().reshape(-1)
        digest = hashlib.sha256(values.view("uint8").data).hexdigest()
        return [digest, float(values.sum(dtype="float64")), math.sqrt(float(values.dot(values)))]
    digest = bytes_digest(torch_module, data)
    if not (data.is_floating_point() or data.is_complex()):
        data = data.double()
    total = float(data.sum(dtype=torch_module.float64).real)
    norm = float(torch_module.linalg.vector_norm(data, dtype=torch_module.float64))
    return [digest, total, norm]


def bytes_digest(torch_module: ModuleType, tensor: torch.Tensor) -> str:
    """A tensor's digest alone: sha256 of its bytes on CPU, the on-device checksum elsewhere."""
    data = tensor.detach()
    if data.device.type != "cpu":
        return device_checksum(torch_module, data)
    if data.is_contiguous() and str(data.dtype).removeprefix("torch.") in NUMPY_FLOATS:
        return hashlib.sha256(data.numpy().data).hexdigest()  # the same bytes, fewer torch calls
    flat = data.contiguous().reshape(-1)
    return hashlib.sha256(flat.view(torch_module.uint8).numpy().data).hexdigest()


def device_checksum(torch_module: ModuleType, data: torch.Tensor) -> str:
    """A bit-exact checksum computed on the device: sum of raw 32-bit words times odd position weights."""
    flat = data.contiguous().reshape(-1).view(torch_module.uint8)
    pad = (-flat.numel()) % 4
    if pad or flat.storage_offset() % 4:  # whole words, at an offset that can be read as words
        flat = torch_module.cat([flat, flat.new_zeros(pad)])
    words = flat.view(torch_module.int32).to(torch_module.int64)
    weights = torch_module.arange(words.numel(), device=words.device, dtype=torch_module.int64) * 2 + 1
    mixed = (words * weights) ^ (words << 17)
    total = int(mixed.sum())
    return f"dev:{total & (2**64 - 1):016x}:{words.numel()}"
