"""Every byte of a file is accounted for: "container bytes" excuse only the formats' framing.

Each case writes two runs' files that carry a second payload (an archive before the one read, data after
a zip's end record, trailing bytes) whose tensors and values as read are equal, hashes them with the
guest's real hashing and compares the records: where the payload differs the runs are never called
reproduced, and the verdict names the file and the byte range. Equal content in other framing (zip
stamps, member order) stays "reproduced, except the container bytes".
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import io
import json
import pickle
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save

from reprobox import compare
from reprobox.guest.hashing import _readers, hash_checkpoint
from reprobox.guest.hashing._arrays import _Content
from reprobox.guest.hashing._layout import Layout, complement
from tests.unit.test_verdicts import two_runs

Write = Callable[[Path, int], None]

FIRST = {"w": torch.ones(4)}
LAST = {"w": torch.full((4,), 2.0)}


def torch_bytes(obj: object) -> bytes:
    stream = io.BytesIO()
    torch.save(obj, stream)
    return stream.getvalue()


def restamped(data: bytes, year: int) -> bytes:
    """The same zip with other member times and in another order: framing that differs, content not."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for info in reversed(source.infolist()):
            copy = zipfile.ZipInfo(info.filename, date_time=(year, 1, 1, 0, 0, 0))
            target.writestr(copy, source.read(info))
    return out.getvalue()


def _npz_bytes() -> bytes:
    out = io.BytesIO()
    np.savez(out, a=np.arange(6.0), b=np.ones((2, 2), dtype=np.int32))
    return out.getvalue()


def _npy_bytes() -> bytes:
    out = io.BytesIO()
    np.save(out, np.arange(5.0))
    return out.getvalue()


def _safetensors_bytes() -> bytes:
    return save({"w": torch.ones(3), "b": torch.zeros(2)}, metadata={"format": "pt"})


def _zip_archive_bytes() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("policy.pth", torch_bytes(FIRST))
        archive.writestr("data", json.dumps({"learning_rate": 0.001}))
        archive.writestr("_version.txt", "2.3.0")
    return out.getvalue()


def _legacy_torch_bytes() -> bytes:
    out = io.BytesIO()
    torch.save(FIRST, out, _use_new_zipfile_serialization=False)
    return out.getvalue()


def _without_layout(plan: Callable[[Path], _Content]) -> Callable[[Path], _Content]:
    """A reader's plan that does not say which bytes it read."""
    return lambda path: dataclasses.replace(plan(path), layout=None)


def _tar_of(text: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        info = tarfile.TarInfo("note.txt")
        info.size = len(text)
        archive.addfile(info, io.BytesIO(text.encode()))
    return out.getvalue()


def assert_not_reproduced(result: compare.Comparison, path: str) -> None:
    assert result.grade == compare.NOT_REPRODUCIBLE, result.sentence
    assert "container bytes" not in result.sentence
    assert path not in result.format_only
    entry = next(d for d in result.value_differences if d["checkpoint"] == path)
    assert entry["name"] == "bytes no reader read"
    assert "bytes at" in entry["a"] and entry["a"] != entry["b"]
    assert f"in {path}" in result.sentence


def test_a_file_of_torch_saves_differing_before_the_last_is_not_reproduced(tmp_path: Path) -> None:
    # several torch.saves one after another in one file (as a DCP shard holds its items; a .distcp is read
    # item by item where its index says, test_dcp_reader): zipfile, and so the torch reader, sees only the
    # last archive
    def write(out: Path, run: int) -> None:
        with (out / "__0_0.pt").open("wb") as f:
            torch.save(torch.full((4,), float(run)), f)  # differs between the runs
            torch.save(torch.ones(4), f)

    result = two_runs(tmp_path, write)
    assert_not_reproduced(result, "__0_0.pt")
    entry = result.value_differences[0]
    assert entry["a"].startswith(f"{len(torch_bytes(torch.ones(4))):,} bytes at 0-")
    # what differs was read by no reader: a stamp or a result, it cannot be told which
    assert result.explanation is not None
    assert "not known whether the runs computed differently" in result.explanation["sentence"]


def test_equal_shards_of_several_torch_saves_are_bit_identical(tmp_path: Path) -> None:
    def write(out: Path, _run: int) -> None:
        (out / "__0_0.distcp").write_bytes(torch_bytes(torch.zeros(4)) + torch_bytes(torch.ones(4)))

    assert two_runs(tmp_path, write).grade == compare.BIT_IDENTICAL


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("model.pt", lambda: torch_bytes(FIRST)),
        ("arrays.npz", _npz_bytes),
        ("weights.safetensors", _safetensors_bytes),
        ("array.npy", _npy_bytes),
        ("state.pkl", lambda: pickle.dumps({"lr": 0.1, "step": 3})),
        ("archive.zip", _zip_archive_bytes),
        ("legacy.pt", _legacy_torch_bytes),
    ],
)
def test_bytes_appended_to_a_file_every_reader_reads_are_never_container_bytes(
    tmp_path: Path, name: str, payload: Callable[[], bytes]
) -> None:
    body = payload()

    def write(out: Path, run: int) -> None:
        (out / name).write_bytes(body + f"SECOND PAYLOAD {run}".encode())

    result = two_runs(tmp_path, write)
    assert_not_reproduced(result, name)
    size = len(body) + len(b"SECOND PAYLOAD 0")
    assert result.value_differences[0]["a"].startswith(f"16 bytes at {len(body)}-{size} ")


def test_a_run_specific_value_does_not_excuse_a_differing_payload_beside_it(tmp_path: Path) -> None:
    # the file's bytes differ for two reasons: its clock reading (excused by the run's record) and a
    # payload no reader read, which is not
    def write(out: Path, run: int) -> None:
        stamp = ["2026-11-23T12:00:30", "2026-11-23T12:01:30"][run]
        body = torch_bytes({"w": torch.ones(4), "saved_at": stamp})
        (out / "model.pt").write_bytes(body + f"SECOND PAYLOAD {run}".encode())

    result = two_runs(tmp_path, write)
    assert [e["name"] for e in result.run_specific] == ["saved_at"]
    assert_not_reproduced(result, "model.pt")


def test_a_tar_with_a_second_archive_appended_is_not_reproduced(tmp_path: Path) -> None:
    def tar_of(data: bytes) -> bytes:
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as archive:
            info = tarfile.TarInfo("model.pt")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        return out.getvalue()

    def write(out: Path, run: int) -> None:
        second = tar_of(torch_bytes({"w": torch.full((4,), float(run))}))
        (out / "ckpt.tar").write_bytes(tar_of(torch_bytes(FIRST)) + second)

    assert_not_reproduced(two_runs(tmp_path, write), "ckpt.tar")


@pytest.mark.parametrize("mode", ["w:xz", "w:gz"])
def test_a_compressed_tar_whose_stream_hides_more_is_never_container_bytes(tmp_path: Path, mode: str) -> None:
    # xz's reader stops silently at bytes after its stream; a gzipped tar may hold a second archive after
    # the first one's end blocks: no verdict, since no file range can be named in a compressed stream
    def write(out: Path, run: int) -> None:
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode=mode) as archive:
            info = tarfile.TarInfo("model.pt")
            data = torch_bytes(FIRST)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        suffix = f"HIDDEN {run}".encode() if mode == "w:xz" else gzip.compress(_tar_of(f"HIDDEN {run}"))
        (out / f"ckpt.tar.{mode[-2:]}").write_bytes(packed.getvalue() + suffix)

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NO_VERDICT, result.sentence
    assert "does not say which bytes it read" in result.sentence
    assert not result.format_only


def test_a_torch_storage_beyond_the_saved_view_is_not_container_bytes(tmp_path: Path) -> None:
    # torch.save of a slice saves its whole storage: the bytes outside the view are no tensor's
    def write(out: Path, run: int) -> None:
        storage = torch.arange(8.0)
        storage[7] = run
        torch.save({"w": storage[:4]}, out / "view.pt")

    assert_not_reproduced(two_runs(tmp_path, write), "view.pt")


def test_a_json_file_with_trailing_bytes_is_read_as_bytes_never_as_container_bytes(tmp_path: Path) -> None:
    # the text readers parse every byte or none: trailing data leaves the file compared as bytes
    def write(out: Path, run: int) -> None:
        (out / "metrics.json").write_text(json.dumps({"loss": 0.5}) + f"\nEXTRA {run}")

    result = two_runs(tmp_path, write)
    assert result.grade != compare.REPRODUCED
    assert not result.format_only
    outputs = tmp_path / "runs/job/20261123T120000Z-aaaaaa/outputs"
    record = hash_checkpoint(outputs / "metrics.json", relative_to=outputs)
    assert record.format == "file" and record.unaccounted is None


def test_a_pickle_inside_json_is_read_to_its_last_byte_in_strict_base64(tmp_path: Path) -> None:
    # Stable-Baselines3 writes objects into its JSON as base64 pickles: bytes after the pickle's end, or
    # characters base64 would skip, leave the string compared as it stands, never as the same value
    def write(out: Path, run: int) -> None:
        pickled = pickle.dumps({"ep": [1.0, 2.0]}) + (b"" if run == 0 else b"extra")
        encoded = base64.b64encode(pickled).decode()
        (out / "data.json").write_text(json.dumps({"buffer": {":type:": "deque", ":serialized:": encoded}}))

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE, result.sentence
    assert "buffer.:serialized:" in {d["name"] for d in result.value_differences}
    assert not result.format_only


def test_a_file_no_row_recognises_is_compared_by_its_bytes(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        (out / "blob.dat").write_bytes(b"\x00\x01" * 8 + bytes([run]))

    result = two_runs(tmp_path, write)
    assert result.grade != compare.REPRODUCED
    assert not result.format_only


def test_a_reader_that_does_not_account_for_its_bytes_never_excuses_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = tuple(
        dataclasses.replace(row, plan=_without_layout(row.plan)) if row.format == "torch" else row
        for row in _readers.READERS
    )
    monkeypatch.setattr(_readers, "READERS", rows)

    def write(out: Path, run: int) -> None:
        (out / "model.pt").write_bytes(restamped(torch_bytes(FIRST), 1990 + run))

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NO_VERDICT, result.sentence
    assert "does not say which bytes it read" in result.sentence
    assert not result.format_only


# --- what stays reproduced ---------------------------------------------------------------------------


def test_equal_tensors_in_torch_zips_of_other_stamps_and_order_are_container_bytes(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        (out / "model.pt").write_bytes(restamped(torch_bytes({"model": FIRST, "step": 3}), 1990 + run))

    result = two_runs(tmp_path, write)
    assert result.grade == compare.REPRODUCED, result.sentence
    assert result.format_only == ["model.pt"]
    assert "except the container bytes of 1 file" in result.sentence


def test_equal_arrays_in_npz_and_archives_of_other_stamps_are_container_bytes(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        (out / "arrays.npz").write_bytes(restamped(_npz_bytes(), 1990 + run))
        (out / "archive.zip").write_bytes(restamped(_zip_archive_bytes(), 1990 + run))
        gz = io.BytesIO()
        with tarfile.open(fileobj=gz, mode="w:gz") as archive:  # the gzip header holds the time
            info = tarfile.TarInfo("model.pt")
            data = torch_bytes(FIRST)
            info.size, info.mtime = len(data), 1000 + run
            archive.addfile(info, io.BytesIO(data))
        (out / "ckpt.tar.gz").write_bytes(gz.getvalue())

    result = two_runs(tmp_path, write)
    assert result.grade == compare.REPRODUCED, result.sentence
    assert sorted(result.format_only) == ["archive.zip", "arrays.npz", "ckpt.tar.gz"]


def test_the_same_second_payload_in_both_runs_is_no_difference(tmp_path: Path) -> None:
    # equal unread bytes, framing that differs: every differing byte is the format's own
    def write(out: Path, run: int) -> None:
        first = torch_bytes(LAST)
        (out / "__0_0.pt").write_bytes(first + restamped(torch_bytes(FIRST), 1990 + run))

    result = two_runs(tmp_path, write)
    assert result.grade == compare.REPRODUCED, result.sentence
    assert result.format_only == ["__0_0.pt"]


# --- the records ---------------------------------------------------------------------------------------


def test_every_reader_accounts_for_every_byte_of_what_it_writes(tmp_path: Path) -> None:
    files = {
        "model.pt": torch_bytes({"w": torch.ones(3, 4).t(), "n": 3}),
        "legacy.pt": _legacy_torch_bytes(),
        "arrays.npz": _npz_bytes(),
        "array.npy": _npy_bytes(),
        "weights.safetensors": _safetensors_bytes(),
        "state.pkl": pickle.dumps({"lr": 0.1}),
        "archive.zip": _zip_archive_bytes(),
        "metrics.json": b'{"loss": 0.5}',
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        record = hash_checkpoint(tmp_path / name, relative_to=tmp_path)
        assert record.unaccounted is not None and record.unaccounted.bytes == 0, (name, record.unaccounted)
        again = type(record).from_json(json.loads(json.dumps(record.to_json())))
        assert again.unaccounted == record.unaccounted


def test_hash_says_which_bytes_no_reader_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reprobox import cli

    (tmp_path / "model.pt").write_bytes(torch_bytes(FIRST))
    (tmp_path / "two.pt").write_bytes(torch_bytes(LAST) + torch_bytes(FIRST))
    assert cli.main(["hash", str(tmp_path / "model.pt"), str(tmp_path / "two.pt")]) == 0
    text = capsys.readouterr().out
    assert "  unread   none: every byte is content or the format's framing" in text
    first = len(torch_bytes(LAST))
    assert f"  unread   {first:,} bytes at 0-{first}: compared by their digest, never excused" in text


def test_a_record_without_accounting_still_loads() -> None:
    from reprobox.guest.hashing import CheckpointDigest

    old = {
        "path": "m.pt",
        "size": 1,
        "file_sha256": "a",
        "content_sha256": "b",
        "format": "torch",
        "tensors": [],
        "metadata": {},
        "metadata_sha256": None,
    }
    assert CheckpointDigest.from_json(old).unaccounted is None


def test_gaps_are_what_no_span_covers() -> None:
    assert complement(10, [(2, 4), (3, 6), (8, 20)]) == [(0, 2), (6, 8)]
    assert complement(10, [(2, 4), (12, 20)]) == [(0, 2), (4, 10)]  # a span past the end covers nothing
    assert complement(10, [(0, 4), (12, 30)]) == [(4, 10)]  # a span past the end: no gap past it
    assert Layout.of(5, [(0, 5)]).whole_file
    assert Layout(5).gaps() == [(0, 5)]


def test_a_member_whose_local_header_runs_past_the_end_is_left_unaccounted(tmp_path: Path) -> None:
    """Its name and extra field declared 65,535 bytes long each: the header claims no framing past it, and
    hashing names its bytes unread, never the machine (a read past the end would say the file changed)."""
    data = bytearray(torch_bytes(FIRST))
    version = next(i for i in zipfile.ZipFile(io.BytesIO(data)).infolist() if i.filename.endswith("version"))
    data[version.header_offset + 26 : version.header_offset + 30] = b"\xff\xff\xff\xff"
    path = tmp_path / "model.pt"
    path.write_bytes(data)
    digest = hash_checkpoint(path, relative_to=tmp_path, strict=True)
    assert digest.format == "torch" and digest.unaccounted is not None
    assert any(start <= version.header_offset < end for start, end in digest.unaccounted.ranges)
