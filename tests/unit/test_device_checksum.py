"""The trail's on-device checksum: the same tensor bits give the same checksum, one flipped bit or a
reordering gives another, whatever the dtype, size, offset or layout (on the CPU here, on a GPU with
`pytest -m gpu`: the checksum is plain torch arithmetic, computed where the tensor lives)."""

from __future__ import annotations

import pytest
import torch

from reprobox.guest.tensorhash import device_checksum as _device_checksum

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int8, torch.float64, torch.bool]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_checksum_sees_every_bit(device: str, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(0)
    base = (torch.randn(1001, generator=generator) * 100).to(dtype).to(device)
    assert _device_checksum(torch, base) == _device_checksum(torch, base.clone())
    flipped = base.clone()
    flipped.view(torch.uint8)[7] ^= 1  # one bit of one element
    assert _device_checksum(torch, base) != _device_checksum(torch, flipped)
    shifted = base[1:]  # a view at an odd byte offset into its storage
    assert _device_checksum(torch, shifted) == _device_checksum(torch, shifted.clone())
    strided = base[1::3]
    assert _device_checksum(torch, strided) == _device_checksum(torch, strided.contiguous())


@pytest.mark.parametrize("device", DEVICES)
def test_checksum_depends_on_positions_and_shape_size(device: str) -> None:
    pair = torch.tensor([1.0, 2.0], device=device)
    assert _device_checksum(torch, pair) != _device_checksum(torch, pair.flip(0))
    assert _device_checksum(torch, torch.zeros(4, device=device)) != _device_checksum(
        torch, torch.zeros(5, device=device)
    )


@pytest.mark.gpu
def test_checksum_is_the_same_number_on_cpu_and_gpu() -> None:
    """Integer arithmetic: a tensor's checksum does not depend on the device that computed it."""
    values = torch.randn(4097)
    assert _device_checksum(torch, values) == _device_checksum(torch, values.cuda())
