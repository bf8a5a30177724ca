"""Numeric differences between checkpoints: counts, largest absolute/relative gaps and ULP distances."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from reprobox.guest.hashing import hash_checkpoint
from reprobox.tensordiff import TensorDifference, diff_checkpoint_files, diff_tensors

INF = torch.tensor(math.inf)


def diff(a: torch.Tensor, b: torch.Tensor, chunk: int = 1 << 21) -> TensorDifference:
    return diff_tensors(a, b, checkpoint="ckpt", name="t", chunk_elements=chunk)


def nudge(t: torch.Tensor, index: int) -> torch.Tensor:
    out = t.clone()
    out[index] = torch.nextafter(t[index], INF.to(t.dtype))
    return out


def test_one_ulp_nudge_in_a_checkpoint_is_found_and_measured(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    weights = {"fc.weight": torch.randn(64, generator=g), "fc.bias": torch.randn(8, generator=g)}
    torch.save(weights, tmp_path / "a.pt")
    nudged = dict(weights, **{"fc.weight": nudge(weights["fc.weight"], 17)})
    save_file(nudged, tmp_path / "b.safetensors")
    digest_a = hash_checkpoint(tmp_path / "a.pt", relative_to=tmp_path)
    digest_b = hash_checkpoint(tmp_path / "b.safetensors", relative_to=tmp_path)
    changed = sorted(
        {t.name for t in digest_a.tensors} - {t.name for t in digest_b.tensors if t in digest_a.tensors}
    )
    assert changed == ["fc.weight"]

    (result,) = diff_checkpoint_files(
        tmp_path / "a.pt", tmp_path / "b.safetensors", checkpoint="model", names=changed
    )
    expected = abs(float(nudged["fc.weight"][17]) - float(weights["fc.weight"][17]))
    assert (result.checkpoint, result.name, result.dtype, result.shape) == (
        "model",
        "fc.weight",
        "float32",
        (64,),
    )
    assert (result.differing, result.total, result.max_ulp) == (1, 64, 1)
    assert result.max_abs == pytest.approx(expected, rel=1e-12)
    assert result.max_rel == pytest.approx(expected / abs(float(nudged["fc.weight"][17])), rel=1e-6)
    assert result.note is None


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_one_ulp_in_every_float_width(dtype: torch.dtype) -> None:
    a = torch.linspace(-3, 3, 11, dtype=torch.float64).to(dtype)
    result = diff(a, nudge(nudge(a, 2), 9))
    assert (result.differing, result.max_ulp) == (2, 1)


def test_differences_are_counted_across_chunk_boundaries() -> None:
    a = torch.arange(20, dtype=torch.float32)
    b = a.clone()
    for i, delta in ((2, 1.0), (3, 2.0), (5, 0.5), (19, 8.0)):  # 2|3 straddle a boundary; 19 is in the tail
        b[i] += delta
    for chunk in (1, 3, 4, 7, 100):
        result = diff(a, b, chunk)
        assert (result.differing, result.total, result.max_abs) == (4, 20, 8.0), chunk
        assert result.max_rel == pytest.approx(2.0 / 5.0)  # at index 3: 3 -> 5


def test_nan_handling() -> None:
    nan = torch.tensor([math.nan])
    other_nan = torch.tensor([0x7FC00001], dtype=torch.int32).view(torch.float32)
    assert diff(nan, nan.clone()).differing == 0  # the same NaN bits are equal
    payload = diff(nan, other_nan)
    assert (payload.differing, payload.max_abs, payload.max_ulp) == (1, 0.0, 1)
    versus_number = diff(torch.tensor([1.0, math.nan]), torch.tensor([math.nan, math.nan]))
    assert versus_number.differing == 1
    assert versus_number.max_abs == math.inf and versus_number.max_rel == math.inf
    data = json.loads(json.dumps(versus_number.to_json()))
    assert data["max_abs"] == "inf" and data["differing"] == 1


def test_ulp_distance_across_zero_and_at_float64_extremes() -> None:
    tiny = torch.tensor([1e-45])  # the smallest float32 subnormal
    assert diff(-tiny, tiny).max_ulp == 2
    zeros = diff(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert (zeros.differing, zeros.max_ulp, zeros.max_abs) == (1, 0, 0.0)
    big = torch.tensor([-1.7976931348623157e308], dtype=torch.float64)
    extreme = diff(big, -big)
    finite_max_bits = struct.unpack("<q", struct.pack("<d", 1.7976931348623157e308))[0]
    assert extreme.max_ulp == 2 * finite_max_bits  # beyond int64: computed exactly
    assert extreme.max_ulp is not None and extreme.max_ulp > 2**63


def test_integers_and_bools_have_no_ulp() -> None:
    ints = diff(torch.tensor([1, 5, -3]), torch.tensor([1, 9, -3]))
    assert (ints.differing, ints.max_abs, ints.max_ulp) == (1, 4.0, None)
    flags = diff(torch.tensor([True, False]), torch.tensor([True, True]))
    assert (flags.differing, flags.max_abs, flags.max_ulp) == (1, 1.0, None)
    same = diff(torch.tensor([7, 8], dtype=torch.uint64), torch.tensor([7, 8], dtype=torch.uint64))
    assert (same.differing, same.max_abs) == (0, 0.0)


def test_narrow_and_complex_types() -> None:
    a8 = torch.tensor([0.5, 1.0, -2.0]).to(torch.float8_e4m3fn)
    b8 = a8.clone()
    b8[1] = torch.tensor(1.125).to(torch.float8_e4m3fn)
    small = diff(a8, b8)
    assert (small.differing, small.max_abs, small.max_ulp) == (1, 0.125, 1)
    c = torch.tensor([1 + 1j, 2 - 1j], dtype=torch.complex64)
    d = c.clone()
    d[1] = torch.tensor(2 + 1j)
    result = diff(c, d)
    assert (result.differing, result.max_abs) == (1, 2.0)


def test_missing_and_mismatched_tensors_are_named(tmp_path: Path) -> None:
    torch.save(
        {"same": torch.ones(2), "gone": torch.ones(3), "w": torch.ones(3, 4), "d": torch.ones(2)},
        tmp_path / "a.pt",
    )
    torch.save(
        {"same": torch.ones(2), "new": torch.ones(5), "w": torch.ones(4, 3), "d": torch.ones(2).double()},
        tmp_path / "b.pt",
    )
    results = {r.name: r for r in diff_checkpoint_files(tmp_path / "a.pt", tmp_path / "b.pt", checkpoint="c")}
    assert results["gone"].note == "only in A" and results["gone"].differing == 3
    assert results["new"].note == "only in B" and results["new"].shape == (5,)
    assert results["w"].note == "shape differs: (3,4) vs (4,3)"
    assert results["d"].note == "dtype differs: float32 vs float64"
    assert results["same"].differing == 0 and results["same"].note is None
    only = diff_checkpoint_files(tmp_path / "a.pt", tmp_path / "b.pt", checkpoint="c", names=["w"])
    assert [r.name for r in only] == ["w"]


def test_strided_and_memory_mapped_inputs(tmp_path: Path) -> None:
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    changed = base.clone()
    changed[3, 1] = -1.0
    torch.save({"t": base.t()}, tmp_path / "a.pt")
    torch.save({"t": changed.t().contiguous()}, tmp_path / "b.pt")
    (result,) = diff_checkpoint_files(tmp_path / "a.pt", tmp_path / "b.pt", checkpoint="c", chunk_elements=5)
    assert (result.differing, result.max_abs, result.shape) == (1, 20.0, (6, 4))
