"""Torch files read without torch give exactly the digests torch's own loading gives.

A corpus of torch.save files (every dtype, strided views, optimizer and RNG states, both file formats) is
hashed in a subprocess that must never import torch; every tensor digest, value digest and content hash
must equal what ``torch.load`` followed by the same flattening and hashing gives in this process.
"""

from __future__ import annotations

import collections
import hashlib
import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from reprobox.guest.hashing import hash_checkpoint, load_tensors
from reprobox.guest.hashing._arrays import _arrays_from
from reprobox.guest.hashing._canonical import (
    TensorDigest,
    _metadata_digests,
    content_sha256,
    flatten,
    metadata_sha256,
)

_QUANTIZED = (torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4)


def _all_dtypes() -> list[torch.dtype]:
    """Every dtype torch.save can write a tensor of (quantized ones are tested on their own)."""
    found = {v for v in vars(torch).values() if isinstance(v, torch.dtype) and v not in _QUANTIZED}
    return sorted(found, key=str)


def _random_tensor(dtype: torch.dtype, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Random bytes read as ``dtype``: every bit pattern a file may hold, NaNs and odd bools included."""
    count = int(np.prod(shape)) * dtype.itemsize
    raw = torch.randint(0, 256, (count,), dtype=torch.uint8, generator=generator)
    return raw.view(dtype).reshape(shape)


def _dtype_corpus(generator: torch.Generator) -> dict[str, torch.Tensor]:
    corpus: dict[str, torch.Tensor] = {}
    for dtype in _all_dtypes():
        name = str(dtype).removeprefix("torch.")
        try:
            tensor = _random_tensor(dtype, (3, 4), generator)
            tensor.t().contiguous()  # some dtypes have no kernels at all: those cannot be in a file either
        except (RuntimeError, TypeError):
            continue
        corpus[name] = tensor
        corpus[f"{name}_transposed"] = tensor.t()
        corpus[f"{name}_sliced"] = tensor[1:, ::2]
    return corpus


def _view_corpus(generator: torch.Generator) -> dict[str, object]:
    base = torch.randn(6, 5, generator=generator)
    complex_values = torch.randn(4, dtype=torch.complex64, generator=generator)
    return {
        "base": base,
        "shared_rows": base[2:],  # shares the storage of base
        "shared_reshaped": base.view(5, 6),
        "shared_column": base[:, 3],
        "expanded": torch.arange(3.0).expand(4, 3),  # stride 0
        "expanded_bf16": torch.arange(3.0).to(torch.bfloat16)[None].expand(5, 3).t(),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "empty": torch.empty(0, 7),
        "conjugated": complex_values.conj(),
        "negated": torch.randn(4, dtype=torch.complex64, generator=generator).conj().imag,
        "offset_complex": torch.randn(3, 3, dtype=torch.complex128, generator=generator)[1:, 1:],
        "parameter": torch.nn.Parameter(torch.randn(2, 2, generator=generator)),
        "meta": torch.empty(2, 3, device="meta", dtype=torch.bfloat16),
    }


def _training_state() -> dict[str, object]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99))
    loss = model(torch.randn(5, 4)).square().mean()
    loss.backward()
    optimizer.step()
    random.seed(1)
    np.random.seed(2)
    return {
        "model": model.state_dict(),  # an OrderedDict (with torch's _metadata attribute)
        "optimizer": optimizer.state_dict(),  # nested state: step, exp_avg, exp_avg_sq per parameter
        "epoch": 3,
        "loss": float(loss.detach()),
        "shape": torch.Size([4, 3]),
        "dtype": torch.bfloat16,
        "device": torch.device("cuda", 0),
        "cpu": torch.device("cpu"),
        "order": collections.OrderedDict([("b", 1), ("a", (1.5, "x", None))]),
        "rng": {
            "torch": torch.get_rng_state(),
            "numpy": np.random.get_state(),
            "python": random.getstate(),
        },
        "tags": {"seen", "twice"},
        "blob": b"\x00\xff",
        "complex_value": 1 + 2j,
    }


def _write_corpus(folder: Path) -> list[Path]:
    generator = torch.Generator().manual_seed(36)
    objects = {
        "dtypes": _dtype_corpus(generator),
        "views": _view_corpus(generator),
        "training": _training_state(),
        "bare_tensor": torch.randn(3, 2, generator=generator).t(),
    }
    written = []
    for name, obj in objects.items():
        for suffix, zip_format in (("zip", True), ("legacy", False)):
            path = folder / f"{name}-{suffix}.pt"
            torch.save(obj, path, _use_new_zipfile_serialization=zip_format)
            written.append(path)
    return written


def _sha256(array: Any) -> str:
    digest = hashlib.sha256()
    for buffer in array.buffers(1 << 20):
        digest.update(buffer)
    return digest.hexdigest()


def _as_torch_loads(path: Path) -> dict[str, object]:
    """The digests of torch's own loading: torch.load, then the flattening and hashing of the contract."""
    obj = torch.load(path, weights_only=False, map_location="cpu")  # our own files: trusted
    named_arrays, values = flatten(obj)
    tensors = sorted(
        (TensorDigest(a.name, a.dtype, a.shape, _sha256(a)) for a in _arrays_from(named_arrays)),
        key=TensorDigest.sort_key,
    )
    metadata = _metadata_digests(values)
    return {
        "content_sha256": content_sha256(tensors),
        "tensors": [t.to_json() for t in tensors],
        "metadata": dict(sorted(metadata.items())),
        "metadata_sha256": metadata_sha256(metadata),
    }


_READ_WITHOUT_TORCH = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from reprobox.guest.hashing import hash_checkpoint
    paths = [Path(p) for p in sys.argv[1:]]
    records = [hash_checkpoint(p, relative_to=p.parent).to_json() for p in paths]
    loaded = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
    print(json.dumps({"records": records, "torch_modules": loaded}))
    """
)


def _read_in_subprocess(paths: list[Path], prelude: str = "") -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", prelude + _READ_WITHOUT_TORCH, *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_every_digest_equals_torchs_own_loading_and_torch_is_never_imported(tmp_path: Path) -> None:
    paths = _write_corpus(tmp_path)
    result = _read_in_subprocess(paths)

    assert result["torch_modules"] == []
    records = dict(zip(paths, result["records"], strict=True))
    for path, record in records.items():
        try:
            expected = _as_torch_loads(path)
        except AttributeError:  # torch cannot load its legacy format with the newer dtypes: the zip twin
            assert path.name == "dtypes-legacy.pt"
            expected = _as_torch_loads(path.with_name("dtypes-zip.pt"))
        assert record["format"] == "torch", path.name
        assert record["reader"] == "safe pickle reader" and record["note"] is None, path.name
        assert record["tensors"] == expected["tensors"], path.name
        assert record["metadata"] == expected["metadata"], path.name
        assert record["metadata_sha256"] == expected["metadata_sha256"], path.name
        assert record["content_sha256"] == expected["content_sha256"], path.name
    dtypes = {t["dtype"] for t in records[tmp_path / "dtypes-zip.pt"]["tensors"]}
    assert {"bfloat16", "float8_e4m3fn", "float8_e5m2", "complex32", "complex128", "bool", "uint64"} <= dtypes
    zip_record, legacy_record = (
        records[tmp_path / "training-zip.pt"],
        records[tmp_path / "training-legacy.pt"],
    )
    assert zip_record["content_sha256"] == legacy_record["content_sha256"]  # the format's bytes do not count
    assert "optimizer.state.0.exp_avg" in {t["name"] for t in zip_record["tensors"]}


def test_tensors_loaded_for_comparison_are_torchs_own(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(5)
    saved = {**_view_corpus(generator), "bf16": _random_tensor(torch.bfloat16, (3, 2), generator).t()}
    del saved["meta"]
    torch.save(saved, tmp_path / "views.pt")

    tensors, _values = load_tensors(tmp_path / "views.pt")

    for name, expected in saved.items():
        assert isinstance(expected, torch.Tensor)
        got = tensors[name]
        assert got.dtype == expected.dtype and got.shape == expected.shape, name
        assert torch.equal(got.resolve_conj().resolve_neg(), expected.resolve_conj().resolve_neg()), name


def _quantized(path: Path) -> None:
    values = torch.randn(4, 3)
    torch.save(
        {
            "per_tensor": torch.quantize_per_tensor(values, 0.1, 3, torch.quint8),
            "per_channel": torch.quantize_per_channel(
                values, torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0, 1, 2]), 1, torch.qint8
            ),
        },
        path,
    )


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor", "ignore:TypedStorage is deprecated")
def test_quantized_tensors_need_torch_and_are_bytes_with_a_note_without_it(tmp_path: Path) -> None:
    _quantized(tmp_path / "quantized.pt")
    expected = _as_torch_loads(tmp_path / "quantized.pt")

    with_torch = hash_checkpoint(tmp_path / "quantized.pt", relative_to=tmp_path)
    assert [t.to_json() for t in with_torch.tensors] == expected["tensors"]
    assert with_torch.content_sha256 == expected["content_sha256"]

    no_torch = "import sys\nsys.modules['torch'] = None  # import torch raises ImportError\n"
    record = _read_in_subprocess([tmp_path / "quantized.pt"], prelude=no_torch)["records"][0]
    assert record["format"] == "file" and record["content_sha256"] == record["file_sha256"]
    assert "quantized tensor" in record["note"] and "torch is not importable" in record["note"]


def test_expanded_views_are_hashed_within_the_expansion_budget(tmp_path: Path) -> None:
    torch.save({"wide": torch.zeros(1).expand(2**31)}, tmp_path / "wide.pt")  # 8 GiB shown from 4 bytes

    record = hash_checkpoint(tmp_path / "wide.pt", relative_to=tmp_path)

    assert record.format == "file" and record.note is not None and "span" in record.note
