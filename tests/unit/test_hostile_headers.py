"""Checkpoints whose headers lie, each a few bytes on disk: every reader refuses them by a named limit,
never by a MemoryError, RecursionError, OverflowError or an internal error. `reprobox hash` exits 2 with
one sentence naming the file and the limit; a run records them by their bytes with a note; a comparison
compares them as bytes and says why."""

from __future__ import annotations

import collections
import io
import json
import pickle
import struct
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from reprobox import cli, compare
from reprobox.errors import EXIT_BAD_INPUT, EXIT_OK, UsageError
from reprobox.guest.hashing import _bounds, _canonical, hash_checkpoint, hash_outputs, load_tensors
from reprobox.outputvalues import load_values
from reprobox.records.manifest import RunRecord

Writer = Callable[[Path], None]


def safetensors(header: dict[str, Any] | bytes, data: bytes = b"") -> Writer:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return lambda path: path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def npy(header: dict[str, Any], data: bytes = b"\0" * 64) -> Writer:
    def write(path: Path) -> None:
        with path.open("wb") as f:
            np.lib.format.write_array_header_1_0(f, header)
            f.write(data)

    return write


def npz_member(header: dict[str, Any], data: bytes = b"\0" * 64) -> Writer:
    def write(path: Path) -> None:
        with zipfile.ZipFile(path, "w") as archive, archive.open("x.npy", "w") as member:
            np.lib.format.write_array_header_1_0(member, header)
            member.write(data)

    return write


class _Storage:
    """Pickled as a torch storage's persistent id, with the element count the test chooses."""

    def __init__(self, numel: int) -> None:
        self.numel = numel


class _Tensor:
    def __init__(self, size: tuple[int, ...], stride: tuple[int, ...], numel: int = 4) -> None:
        self.args = (_Storage(numel), 0, size, stride, False, collections.OrderedDict())

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return torch._utils._rebuild_tensor_v2, self.args


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: object) -> object:
        return ("storage", torch.FloatStorage, "0", "cpu", obj.numel) if isinstance(obj, _Storage) else None


def torch_zip(size: tuple[int, ...], stride: tuple[int, ...]) -> Writer:
    """A torch.save zip archive whose one tensor declares ``size`` and ``stride`` over 16 bytes."""

    def write(path: Path) -> None:
        buffer = io.BytesIO()
        _Pickler(buffer, protocol=2).dump({"w": _Tensor(size, stride)})
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("archive/data.pkl", buffer.getvalue())
            archive.writestr("archive/byteorder", "little")
            archive.writestr("archive/data/0", b"\0" * 16)
            archive.writestr("archive/version", "3\n")

    return write


def legacy_storage_of(count: int) -> Writer:
    """torch's legacy (non-zip) format with its one storage's element count rewritten."""

    def write(path: Path) -> None:
        torch.save({"w": torch.arange(4.0)}, path, _use_new_zipfile_serialization=False)
        raw = path.read_bytes()
        at = raw.rfind(struct.pack("<q", 4) + torch.arange(4.0).numpy().tobytes())
        path.write_bytes(raw[:at] + struct.pack("<q", count) + raw[at + 8 :])

    return write


def nested(levels: int) -> Writer:
    def write(path: Path) -> None:
        value: object = {"w": torch.zeros(1)}
        for _ in range(levels):
            value = {"x": value}
        torch.save(value, path)

    return write


def a_billion_members(path: Path) -> None:
    """Only a zip's end records, declaring 10**9 members (ZIP64): refused before any directory is read."""
    zip64_end = b"PK\x06\x06" + struct.pack("<QHHIIQQQQ", 44, 45, 45, 0, 0, 10**9, 10**9, 0, 0)
    locator = b"PK\x06\x07" + struct.pack("<IQI", 0, 0, 1)
    end = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    path.write_bytes(zip64_end + locator + end)


F32_4 = {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}
CHECKPOINTS: dict[str, tuple[Writer, str]] = {
    "deep.safetensors": (safetensors(b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"), "64 levels"),
    "huge-dims.safetensors": (safetensors({"w": {**F32_4, "shape": [0, 2**70]}}), "limit of 2**48"),
    "negative.safetensors": (safetensors({"w": {**F32_4, "shape": [-4]}}, b"\0" * 16), "negative dimension"),
    "many-dims.safetensors": (safetensors({"w": {**F32_4, "shape": [1] * 65}}), "limit of 64"),
    "past-end.safetensors": (
        safetensors({"w": {**F32_4, "data_offsets": [0, 2**62]}}),
        "outside the 0 bytes",
    ),
    "overlap.safetensors": (
        safetensors({"a": F32_4, "b": {**F32_4, "data_offsets": [8, 24]}}, b"\0" * 24),
        "'a' and 'b' overlap",
    ),
    "long-header.safetensors": (lambda p: p.write_bytes(struct.pack("<Q", 2**40) + b"{}"), "more than the 2"),
    "unknown-dtype.safetensors": (safetensors({"w": {**F32_4, "dtype": "Q9", "shape": [2**50]}}), "2**48"),
    "huge.npy": (npy({"descr": "<f8", "fortran_order": False, "shape": (2**40,)}), "truncated"),
    "negative.npy": (npy({"descr": "<f8", "fortran_order": False, "shape": (-1, 8)}), "negative dimension"),
    "absurd.npy": (npy({"descr": "<f8", "fortran_order": True, "shape": (0, 2**70)}), "limit of 2**48"),
    "fortran-huge.npy": (npy({"descr": "<f8", "fortran_order": True, "shape": (2**20, 2**20)}), "truncated"),
    "huge-member.npz": (
        npz_member({"descr": "<f8", "fortran_order": True, "shape": (3 << 27,)}),
        "truncated",
    ),
    "absurd-member.npz": (npz_member({"descr": "<f4", "fortran_order": False, "shape": (0, 2**70)}), "2**48"),
    "billion.npz": (a_billion_members, "lists 1000000000 members, over the limit of 100000"),
    "shape-huge.pt": (torch_zip((0, 2**70), (1, 1)), "2**48"),
    "shape-negative.pt": (torch_zip((-4,), (1,)), "integers from 0 to 2**48"),
    "numel-huge.pt": (torch_zip((2**31, 2**31), (2**31, 1)), "limit of 2**48 elements"),
    "stride-huge.pt": (torch_zip((2, 2), (2**62, 1)), "stride"),
    "legacy-huge.pt": (legacy_storage_of(2**40), "does not fit the file"),
    "nested.pt": (nested(300), "limit of 200 levels"),
}
VALUES: dict[str, tuple[Writer, str]] = {
    "deep.json": (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "limit of 200 levels"),
    "deep.jsonl": (lambda p: p.write_text('{"a": 1}\n' + "[" * 5000 + "]" * 5000 + "\n"), "200 levels"),
    "wide.csv": (lambda p: p.write_text("a,b\n1," + "x" * 200_000 + "\n"), "field larger than field limit"),
}


def written(tmp_path: Path, name: str, writer: Writer) -> Path:
    path = tmp_path / name
    writer(path)
    assert path.stat().st_size < 1 << 20  # small on disk: the lie is in the header
    return path


@pytest.mark.parametrize("name", [*CHECKPOINTS, *VALUES])
def test_reprobox_hash_refuses_a_file_beyond_a_limit_in_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    writer, says = {**CHECKPOINTS, **VALUES}[name]
    path = written(tmp_path, name, writer)
    started = time.monotonic()
    code = cli.main(["hash", str(path)])
    out, err = capsys.readouterr()
    assert time.monotonic() - started < 20
    assert code == EXIT_BAD_INPUT, err
    assert err.startswith(f"error: {path} is refused: ") and says in err, err
    assert "reprobox reads no checkpoint beyond its limits" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and out == ""


@pytest.mark.parametrize("name", [*CHECKPOINTS, *VALUES])
def test_a_run_records_such_a_file_by_its_bytes_with_the_limit_in_its_note(tmp_path: Path, name: str) -> None:
    writer, says = {**CHECKPOINTS, **VALUES}[name]
    digest = hash_checkpoint(written(tmp_path, name, writer), relative_to=tmp_path)
    assert digest.format == "file" and digest.content_sha256 == digest.file_sha256
    assert digest.note is not None and says in digest.note, digest.note


@pytest.mark.parametrize("name", list(CHECKPOINTS))
def test_loading_such_a_checkpoint_for_comparison_raises_a_usage_error(tmp_path: Path, name: str) -> None:
    writer, says = CHECKPOINTS[name]
    path = written(tmp_path, name, writer)
    with pytest.raises(UsageError, match=f"^{path}") as raised:
        load_tensors(path)
    assert says in str(raised.value) or "safe pickle reader" in str(raised.value)


@pytest.mark.parametrize("name", list(VALUES))
def test_the_values_of_such_a_file_are_not_read_at_compare_time(tmp_path: Path, name: str) -> None:
    writer, _says = VALUES[name]
    assert load_values(written(tmp_path, name, writer)) is None


def test_too_many_values_are_refused_by_the_same_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_canonical, "MAX_VALUES", 10)
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({f"m{i}": i for i in range(20)}))
    assert cli.main(["hash", str(path)]) == EXIT_BAD_INPUT
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.note is not None and "more than the limit of 10 values" in digest.note


def test_a_fortran_member_over_the_memory_limit_is_refused_and_one_under_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    array = np.arange(64 * 64, dtype=np.float64).reshape(64, 64)
    np.savez_compressed(tmp_path / "f.npz", a=np.asfortranarray(array))
    torch.save({"a": torch.from_numpy(array)}, tmp_path / "c.pt")
    same = hash_checkpoint(tmp_path / "f.npz", relative_to=tmp_path)
    assert same.content_sha256 == hash_checkpoint(tmp_path / "c.pt", relative_to=tmp_path).content_sha256
    monkeypatch.setattr(_bounds, "MAX_IN_MEMORY_BYTES", 1024)  # the 32 KiB member is now over it
    assert cli.main(["hash", str(tmp_path / "f.npz")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "member 'a.npy' would take 32768 bytes of memory to convert from Fortran order" in err
    assert "over the limit of 1024 bytes" in err
    with pytest.raises(UsageError, match="would take 32768 bytes of memory decompressed"):
        load_tensors(tmp_path / "f.npz")


def test_big_endian_members_are_streamed_little_endian(tmp_path: Path) -> None:
    values = {"f": np.arange(300_000, dtype=np.float32), "c": np.arange(6, dtype=np.complex128) * (1 + 2j)}
    np.savez_compressed(
        tmp_path / "big.npz", **{k: v.astype(v.dtype.newbyteorder(">")) for k, v in values.items()}
    )
    torch.save({k: torch.from_numpy(v) for k, v in values.items()}, tmp_path / "little.pt")
    big, little = (hash_checkpoint(tmp_path / n, relative_to=tmp_path) for n in ("big.npz", "little.pt"))
    assert big.format == "numpy" and big.content_sha256 == little.content_sha256


def test_genuine_oddities_are_hashed_or_noted_not_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    safetensors({"w": {"dtype": "Q9", "shape": [2, 2], "data_offsets": [0, 3]}}, b"abc")(
        tmp_path / "q.safetensors"
    )
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(tmp_path / "f.npy", np.asfortranarray(np.arange(12.0).reshape(3, 4)))
    assert cli.main(["hash", *(str(tmp_path / n) for n in ("q.safetensors", "o.npy", "f.npy"))]) == EXIT_OK
    out = capsys.readouterr().out
    assert "holds Python objects, which are never unpickled" in out  # a note: not a limit, never unpickled
    unknown = hash_checkpoint(tmp_path / "q.safetensors", relative_to=tmp_path)
    assert unknown.format == "safetensors" and unknown.tensors[0].dtype == "safetensors:Q9"
    tensors, _ = load_tensors(tmp_path / "q.safetensors")
    assert bytes(tensors["w"].numpy()) == b"abc"  # compared as its bytes


# --- comparisons --------------------------------------------------------------------------------


def make_run(root: Path, run_id: str, write: Writer, job: dict[str, Any]) -> RunRecord:
    """A run as the controller records it: its outputs hashed by the guest's hashing."""
    outputs = root / "runs" / "job" / run_id / "outputs"
    outputs.mkdir(parents=True)
    write(outputs)
    data = {
        "run_id": run_id,
        "status": "succeeded",
        "job": job,
        "fingerprint": {"hardware": {"hostname": "node1"}},
        "checkpoints": [d.to_json() for d in hash_outputs(outputs, [])],
    }
    return RunRecord(outputs.parent.resolve(), data)


def two_runs(tmp_path: Path, write: Callable[[Path, int], None], job: dict[str, Any]) -> compare.Comparison:
    a = make_run(tmp_path, "20261123T120000Z-aaaaaa", lambda out: write(out, 0), job)
    b = make_run(tmp_path, "20261123T120105Z-bbbbbb", lambda out: write(out, 1), job)
    return compare.compare_runs([a, b])


def absurd_safetensors(out: Path, run: int) -> None:
    header = {"w": {**F32_4, "shape": [0, 2**70], "data_offsets": [0, 0]}, "b": F32_4}
    safetensors(header, struct.pack("<4f", run, 0, 0, 0))(out / "m.safetensors")


@pytest.mark.parametrize("declared", [False, True])
def test_a_comparison_compares_such_a_file_as_bytes_and_says_why(tmp_path: Path, declared: bool) -> None:
    job = {"checkpoints": ["*.safetensors"]} if declared else {}
    result = two_runs(tmp_path, absurd_safetensors, job)
    text = " ".join(result.notes)
    assert "m.safetensors" in text and "limit of 2**48 elements" in text
    assert result.verdict == (compare.DIFFERENT if declared else compare.FAILED)
    assert [d["name"] for d in result.differences] == (["<file>"] if declared else [])
    assert json.dumps(result.to_json())  # no huge integer or tensor left in what is printed


def test_tensor_statistics_that_cannot_be_loaded_are_one_line_of_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def write(out: Path, run: int) -> None:
        np.savez(out / "w.npz", a=np.asfortranarray(np.full((64, 64), float(run))))

    a = make_run(tmp_path, "20261123T120000Z-aaaaaa", lambda out: write(out, 0), {})
    b = make_run(tmp_path, "20261123T120105Z-bbbbbb", lambda out: write(out, 1), {})
    monkeypatch.setattr(_bounds, "MAX_IN_MEMORY_BYTES", 1024)  # hashed before, too large to load now
    result = compare.compare_runs([a, b])
    assert result.verdict == compare.DIFFERENT and result.differences == [
        {"checkpoint": "w.npz", "name": "a"}
    ]
    (note,) = [n for n in result.notes if "tensor statistics unavailable" in n]
    assert "UsageError" in note and "over the limit of 1024 bytes" in note and "\n" not in note
