"""Canonical checkpoint hashing on real files written by torch, safetensors and NumPy."""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from reprobox.errors import UsageError
from reprobox.guest import hashing
from reprobox.guest.hashing import (
    CheckpointDigest,
    content_digest,
    hash_checkpoint,
    hash_outputs,
    load_tensors,
)


def state_dict() -> OrderedDict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return OrderedDict(
        [
            ("fc.weight", torch.randn(4, 3, generator=g)),
            ("fc.bias", torch.randn(4, generator=g, dtype=torch.float64)),
            ("emb", torch.randn(5, 2, generator=g).to(torch.bfloat16)),
            ("scale", torch.randn(6, generator=g).to(torch.float8_e4m3fn)),
            ("mask", torch.tensor([True, False, True])),
            ("phase", torch.randn(3, generator=g, dtype=torch.complex64)),
            ("steps", torch.tensor(7, dtype=torch.int64)),
        ]
    )


def digest(path: Path, workers: int | None = None) -> CheckpointDigest:
    return hash_checkpoint(path, relative_to=path.parent, workers=workers)


def raw_sha256(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def write_safetensors(path: Path, header: dict[str, object], data: bytes) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def test_same_weights_hash_equal_across_key_order_and_container_format(tmp_path: Path) -> None:
    sd = state_dict()
    torch.save(sd, tmp_path / "a.pt")
    torch.save(OrderedDict(reversed(sd.items())), tmp_path / "b.pt")
    save_file(dict(sd), tmp_path / "c.safetensors")
    digests = [digest(tmp_path / n) for n in ("a.pt", "b.pt", "c.safetensors")]

    assert len({d.content_sha256 for d in digests}) == 1
    assert len({d.file_sha256 for d in digests}) == 3
    assert [d.format for d in digests] == ["torch", "torch", "safetensors"]
    assert all(d.tensors == digests[0].tensors for d in digests)
    by_name = {t.name: t for t in digests[0].tensors}
    assert {n: t.dtype for n, t in by_name.items()} == {
        "fc.weight": "float32",
        "fc.bias": "float64",
        "emb": "bfloat16",
        "scale": "float8_e4m3fn",
        "mask": "bool",
        "phase": "complex64",
        "steps": "int64",
    }
    assert by_name["steps"].shape == ()
    for name, tensor in sd.items():  # raw bytes, never converted
        assert by_name[name].sha256 == raw_sha256(tensor), name


def test_legacy_torch_files_load_without_mmap(tmp_path: Path) -> None:
    sd = state_dict()
    del sd["scale"]  # torch cannot read float8 from the legacy format with weights_only
    torch.save(sd, tmp_path / "zip.pt")
    torch.save(sd, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    legacy = digest(tmp_path / "legacy.pt")
    assert legacy.format == "torch" and len(legacy.tensors) == len(sd)
    assert legacy.content_sha256 == digest(tmp_path / "zip.pt").content_sha256


def test_file_sha256_is_the_plain_sha256_of_the_file(tmp_path: Path) -> None:
    torch.save(state_dict(), tmp_path / "a.pt")
    result = digest(tmp_path / "a.pt")
    assert result.file_sha256 == hashlib.sha256((tmp_path / "a.pt").read_bytes()).hexdigest()
    assert result.size == (tmp_path / "a.pt").stat().st_size
    assert result.path == "a.pt"


def test_content_hash_follows_the_documented_serialisation(tmp_path: Path) -> None:
    torch.save(state_dict(), tmp_path / "a.pt")
    result = digest(tmp_path / "a.pt")
    rows = sorted([t.name, t.dtype, list(t.shape), t.sha256] for t in result.tensors)
    expected = hashlib.sha256(json.dumps(rows, separators=(",", ":"), ensure_ascii=True).encode()).hexdigest()
    assert result.content_sha256 == expected
    assert [t.name for t in result.tensors] == sorted(t.name for t in result.tensors)


def test_one_element_changed_changes_only_that_tensor(tmp_path: Path) -> None:
    sd = state_dict()
    torch.save(sd, tmp_path / "a.pt")
    weight = sd["fc.weight"].clone()
    weight[2, 1] = torch.nextafter(weight[2, 1], torch.tensor(math.inf))
    sd["fc.weight"] = weight
    torch.save(sd, tmp_path / "b.pt")
    a, b = digest(tmp_path / "a.pt"), digest(tmp_path / "b.pt")
    assert a.content_sha256 != b.content_sha256
    changed = {t.name for t in a.tensors} - {t.name for t in b.tensors if t in a.tensors}
    assert changed == {"fc.weight"}


@pytest.mark.parametrize(
    "dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.float16, torch.bool]
)
def test_narrow_dtypes_hash_their_bytes_and_one_bit_matters(tmp_path: Path, dtype: torch.dtype) -> None:
    base = torch.zeros(16, dtype=torch.uint8)
    flipped = base.clone()
    flipped[5] = 1
    for name, raw in (("a.pt", base), ("b.pt", flipped)):
        tensor = raw.view(dtype) if dtype != torch.bool else raw.bool()
        torch.save({"t": tensor}, tmp_path / name)
    a, b = digest(tmp_path / "a.pt"), digest(tmp_path / "b.pt")
    assert a.tensors[0].dtype == hashing.torch_dtype_name(dtype)
    assert a.tensors[0].sha256 == hashlib.sha256(bytes(16)).hexdigest()
    assert a.content_sha256 != b.content_sha256


def test_nested_optimizer_state_flattens_to_dotted_names(tmp_path: Path) -> None:
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    torch.save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3, "losses": [0.5, 0.25]},
        tmp_path / "ckpt.pt",
    )
    result = digest(tmp_path / "ckpt.pt")
    names = {t.name for t in result.tensors}
    assert {
        "model.weight",
        "model.bias",
        "optimizer.state.0.exp_avg",
        "optimizer.state.1.exp_avg_sq",
    } <= names
    assert "optimizer.state.0.step" in names  # a tensor in current torch
    assert {"epoch", "losses", "optimizer.param_groups.0.lr", "optimizer.param_groups.0.betas"} <= set(
        result.metadata
    )
    assert "optimizer.param_groups.0.betas.0" not in result.metadata  # a tuple of numbers is one value
    tensors, values = load_tensors(tmp_path / "ckpt.pt")
    assert set(tensors) == names
    assert set(values) == set(result.metadata)
    assert values["optimizer.param_groups.0.lr"] == 0.01


def test_metadata_differences_change_digests_not_the_content_hash(tmp_path: Path) -> None:
    weights = state_dict()
    secret = "s3cr3t-token-value"
    for run in ("a", "b"):
        config = {"output_dir": f"/runs/{run}", "lr": 0.1, "token": secret, "sizes": torch.Size([2, 3])}
        torch.save({"model": weights, "config": config, "note": None}, tmp_path / f"{run}.pt")
    a, b = digest(tmp_path / "a.pt"), digest(tmp_path / "b.pt")
    assert a.content_sha256 == b.content_sha256
    assert a.metadata_sha256 != b.metadata_sha256
    differing = sorted(k for k in a.metadata if a.metadata[k] != b.metadata.get(k))
    assert differing == ["config.output_dir"]
    assert set(a.metadata) == {"config.output_dir", "config.lr", "config.token", "config.sizes", "note"}
    assert secret not in json.dumps(a.to_json())  # digests only, never values


def test_metadata_digest_is_the_canonical_json_of_the_value(tmp_path: Path) -> None:
    torch.save(
        {"w": torch.ones(1), "cfg": {"betas": (0.9, 0.99), "size": torch.Size([2, 3])}}, tmp_path / "a.pt"
    )
    result = digest(tmp_path / "a.pt")
    assert result.metadata["cfg.betas"] == hashlib.sha256(b"[0.9,0.99]").hexdigest()
    assert result.metadata["cfg.size"] == hashlib.sha256(b"[2,3]").hexdigest()
    assert (
        result.metadata_sha256
        == hashlib.sha256(
            json.dumps(result.metadata, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
    )


def test_colliding_names_do_not_depend_on_insertion_order(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(1), "a.b": 1, "a": {"b": 2}}, tmp_path / "x.pt")
    torch.save({"a": {"b": 2}, "a.b": 1, "w": torch.ones(1)}, tmp_path / "y.pt")
    x, y = digest(tmp_path / "x.pt"), digest(tmp_path / "y.pt")
    assert x.metadata == y.metadata and list(x.metadata) == ["a.b"]


class Payload:
    """Pickles to a call that creates a directory when (and only when) it is unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.mkdir, (str(self.marker),))


def test_arbitrary_pickled_objects_are_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "payload-ran"
    out = tmp_path / "out"
    out.mkdir()
    torch.save({"w": torch.ones(2), "payload": Payload(marker)}, out / "evil.pt")

    result = digest(out / "evil.pt")
    tensors, values = load_tensors(out / "evil.pt")

    assert not marker.exists()
    assert result.format == "torch" and result.reader == "safe pickle reader"
    assert [t.name for t in result.tensors] == ["w"] and torch.equal(tensors["w"], torch.ones(2))
    assert values["payload.__class__"] == "posix.mkdir" and values["payload.__args__"] == [str(marker)]
    assert result.note is not None and "refused" in result.note and "mkdir" in result.note
    torch.load(out / "evil.pt", weights_only=False)  # control: the payload is live when unpickled
    assert marker.exists()


def test_unreadable_checkpoints_fall_back_to_the_file_hash_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "junk.pt").write_bytes(b"\x00 not a checkpoint" * 10)
    write_safetensors(
        tmp_path / "short.safetensors",
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
        b"\0" * 8,
    )
    (tmp_path / "tiny.safetensors").write_bytes(b"\x01\x02")
    entry = b'{"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}'
    twice = b'{"w": ' + entry + b', "w": ' + entry + b"}"
    (tmp_path / "twice.safetensors").write_bytes(struct.pack("<Q", len(twice)) + twice + b"\x00")
    write_safetensors(
        tmp_path / "size.safetensors",
        {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}},
        b"\0" * 16,
    )
    for name in ("junk.pt", "short.safetensors", "tiny.safetensors", "size.safetensors", "twice.safetensors"):
        result = digest(tmp_path / name)
        assert result.format == "file", name
        assert result.content_sha256 == result.file_sha256
        assert result.note is not None and "content not hashed" in result.note


def test_torchscript_archives_are_not_run(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated, still written
        torch.jit.script(torch.nn.Linear(2, 2)).save(str(tmp_path / "scripted.pt"))
    result = digest(tmp_path / "scripted.pt")
    assert result.note is not None and "TorchScript" in result.note  # its code is never loaded or run
    assert result.format == "torchscript" and result.reader == "TorchScript archive reader"
    assert sorted(t.name for t in result.tensors) == ["bias", "weight"]  # by their place in the module


def test_other_files_are_hashed_as_files(tmp_path: Path) -> None:
    (tmp_path / "log.txt").write_text("hello\n")
    result = digest(tmp_path / "log.txt")
    assert result.format == "file" and result.note is None
    assert result.content_sha256 == result.file_sha256 == hashlib.sha256(b"hello\n").hexdigest()


def test_safetensors_metadata_and_hand_written_headers(tmp_path: Path) -> None:
    values = np.arange(6, dtype="<f4")
    header = {
        "__metadata__": {"format": "pt", "step": "10"},
        "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "packed": {"dtype": "F4", "shape": [2, 4], "data_offsets": [24, 28]},
    }
    write_safetensors(tmp_path / "m.safetensors", header, values.tobytes() + bytes([1, 2, 3, 4]))
    torch.save(
        {
            "w": torch.from_numpy(values.reshape(2, 3)),
            "packed": torch.tensor([[1, 2], [3, 4]], dtype=torch.uint8).view(torch.float4_e2m1fn_x2),
        },
        tmp_path / "m.pt",
    )
    st, pt = digest(tmp_path / "m.safetensors"), digest(tmp_path / "m.pt")
    assert st.content_sha256 == pt.content_sha256  # fp4: safetensors counts values, torch packs pairs
    assert set(st.metadata) == {"__metadata__.format", "__metadata__.step"}
    tensors, meta = load_tensors(tmp_path / "m.safetensors")
    assert torch.equal(tensors["w"], torch.arange(6, dtype=torch.float32).reshape(2, 3))
    assert meta == {"__metadata__.format": "pt", "__metadata__.step": "10"}


def test_numpy_files_hash_like_the_same_tensors(tmp_path: Path) -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    torch.save({"a": torch.from_numpy(array), "b": torch.arange(5)}, tmp_path / "t.pt")
    np.savez_compressed(tmp_path / "c.npz", a=array.astype(">f4"), b=np.arange(5, dtype=np.int64))
    np.savez(tmp_path / "u.npz", a=np.asfortranarray(array), b=np.arange(5, dtype=np.int64))
    torch.save(torch.from_numpy(array), tmp_path / "single.pt")
    np.save(tmp_path / "single.npy", array.astype(">f4"))
    digests = {n: digest(tmp_path / n) for n in ("t.pt", "c.npz", "u.npz", "single.pt", "single.npy")}
    assert (
        digests["t.pt"].content_sha256 == digests["c.npz"].content_sha256 == digests["u.npz"].content_sha256
    )
    assert digests["single.pt"].content_sha256 == digests["single.npy"].content_sha256
    assert digests["single.npy"].tensors[0].name == ""
    assert digests["c.npz"].format == "numpy"
    tensors, _ = load_tensors(tmp_path / "c.npz")
    assert torch.equal(tensors["a"], torch.from_numpy(array))


def test_numpy_object_arrays_are_not_unpickled(tmp_path: Path) -> None:
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "o.npz", x=np.array([{"a": 1}], dtype=object))
    for name in ("o.npy", "o.npz"):
        result = digest(tmp_path / name)
        assert result.format == "file" and result.note is not None, name


def test_non_contiguous_tensors_hash_as_their_row_major_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hashing, "COPY_BUDGET_BYTES", 64)  # force row-by-row and nested slicing
    base = torch.arange(4 * 6 * 5, dtype=torch.float32).reshape(4, 6, 5)
    strided = base.permute(2, 0, 1)  # (5, 4, 6), non-contiguous; each row is 96 bytes > budget
    torch.save({"t": strided, "small": base[:, ::2, 0]}, tmp_path / "strided.pt")
    torch.save({"t": strided.contiguous(), "small": base[:, ::2, 0].contiguous()}, tmp_path / "dense.pt")
    loaded = torch.load(tmp_path / "strided.pt", weights_only=True)
    assert not loaded["t"].is_contiguous()
    a, b = digest(tmp_path / "strided.pt"), digest(tmp_path / "dense.pt")
    assert a.content_sha256 == b.content_sha256
    assert {t.name: t.sha256 for t in a.tensors}["t"] == raw_sha256(strided)


def test_parallel_and_serial_hashing_agree(tmp_path: Path) -> None:
    torch.save(state_dict(), tmp_path / "a.pt")
    assert digest(tmp_path / "a.pt", workers=1) == digest(tmp_path / "a.pt", workers=4)
    assert content_digest(tmp_path / "a.pt", workers=2)[0] == digest(tmp_path / "a.pt").content_sha256
    with pytest.raises(UsageError, match="workers"):
        digest(tmp_path / "a.pt", workers=0)


def test_json_round_trip_and_damaged_records(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(2), "lr": 0.1}, tmp_path / "a.pt")
    result = digest(tmp_path / "a.pt")
    data = json.loads(json.dumps(result.to_json()))
    assert CheckpointDigest.from_json(data) == result
    with pytest.raises(UsageError, match="tensors"):
        CheckpointDigest.from_json({**data, "tensors": "nope"})
    with pytest.raises(UsageError, match="size"):
        CheckpointDigest.from_json({**data, "size": "12"})


def make_tree(root: Path) -> None:
    (root / "ckpt" / "epoch1").mkdir(parents=True)
    torch.save({"w": torch.ones(1)}, root / "model.pt")
    save_file({"w": torch.ones(1)}, root / "ckpt" / "epoch1" / "a.safetensors")
    save_file({"w": torch.zeros(1)}, root / "ckpt" / "b.safetensors")
    save_file({"w": torch.zeros(1)}, root / "top.safetensors")
    (root / "log.txt").write_text("log\n")


def test_patterns_select_files_sorted_by_path(tmp_path: Path) -> None:
    make_tree(tmp_path)
    chosen = hash_outputs(tmp_path, ["ckpt/**/*.safetensors", "*.pt"])
    assert [d.path for d in chosen] == ["ckpt/b.safetensors", "ckpt/epoch1/a.safetensors", "model.pt"]
    everything = hash_outputs(tmp_path, [])
    assert [d.path for d in everything] == [
        "ckpt/b.safetensors",
        "ckpt/epoch1/a.safetensors",
        "log.txt",
        "model.pt",
        "top.safetensors",
    ]
    assert [d.path for d in hash_outputs(tmp_path, ["*.safetensors"])] == ["top.safetensors"]
    assert [d.path for d in hash_outputs(tmp_path, ["./ckpt/*"])] == ["ckpt/b.safetensors"]
    assert hash_outputs(tmp_path, ["*.npz"]) == []


def test_many_files_on_one_pool_match_one_by_one_hashing(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(3)
    for i in range(15):  # more files than the pool plans ahead
        tensors = {"w": torch.randn(1000 * (i % 4) + 1, generator=g), "b": torch.randn(3, generator=g)}
        (
            save_file(tensors, tmp_path / f"{i:02d}.safetensors")
            if i % 2
            else torch.save(tensors, tmp_path / f"{i:02d}.pt")
        )
    together = hash_outputs(tmp_path, [], workers=2)
    assert [d.path for d in together] == sorted(p.name for p in tmp_path.iterdir())
    assert together == [digest(tmp_path / d.path, workers=1) for d in together]


@pytest.mark.parametrize("pattern", ["/etc/*", "../*.pt", "ckpt/../../x", ""])
def test_patterns_that_leave_the_directory_are_refused(tmp_path: Path, pattern: str) -> None:
    with pytest.raises(UsageError, match="output pattern"):
        hash_outputs(tmp_path, [pattern])


def test_symlinks_leading_outside_are_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    torch.save({"secret": torch.ones(1)}, outside / "other.pt")
    out = tmp_path / "out"
    out.mkdir()
    torch.save({"w": torch.ones(1)}, out / "model.pt")
    (out / "escape.pt").symlink_to(outside / "other.pt")
    (out / "alias.pt").symlink_to(out / "model.pt")
    (out / "dirlink").symlink_to(outside, target_is_directory=True)
    (out / "dangling.pt").symlink_to(tmp_path / "missing.pt")
    (out / "relative.pt").symlink_to(Path("..") / "outside" / "other.pt")

    paths = [d.path for d in hash_outputs(out, [])]
    assert paths == ["alias.pt", "model.pt"]
    assert [d.path for d in hash_outputs(out, ["dirlink/*.pt", "**/*.pt"])] == ["alias.pt", "model.pt"]


def test_missing_output_dir_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        hash_outputs(tmp_path / "nope", [])
    with pytest.raises(UsageError, match="not inside"):
        hash_checkpoint(tmp_path / "a.pt", relative_to=tmp_path / "elsewhere")


def test_importing_the_module_does_not_import_torch() -> None:
    code = "import sys, reprobox.guest.hashing, reprobox.tensordiff; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"
