"""Compressed outputs read as the file they hold, and Keras ``.keras`` zips member by member: the
container's stamps (gzip's time and name, a zip's member times) are never what differs."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from reprobox import compare
from reprobox.errors import UsageError
from reprobox.guest.hashing import (
    _compressed,
    _readers,
    format_of,
    hash_checkpoint,
    load_tensors,
    load_values,
)
from reprobox.guest.hashing._arrays import _Content
from reprobox.guest.hashing._canonical import _metadata_digests
from tests.unit.test_archives import make_run

METRICS = {"loss": [0.5, 0.25], "lr": 0.001, "epoch": 2}


def gzipped(data: bytes, *, mtime: int, name: str = "metrics.json", level: int = 9) -> bytes:
    """gzip as the gzip module (and the gzip tool) writes it: the time and original name in its header."""
    out = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", fileobj=out, mtime=mtime, compresslevel=level) as stream:
        stream.write(data)
    return out.getvalue()


def test_gzipped_json_is_read_as_json_and_its_header_stamps_are_not_compared(tmp_path: Path) -> None:
    text = json.dumps(METRICS).encode()
    first = gzipped(text, mtime=1795836268, name="metrics.json")
    again = gzipped(text, mtime=1795839999, name="/tmp/elsewhere/metrics.json", level=1)
    assert first != again
    a = make_run(tmp_path, "20261128T030000Z-aaaaaa", {"metrics.json.gz": first})
    b = make_run(tmp_path, "20261128T030100Z-bbbbbb", {"metrics.json.gz": again})
    record = a.checkpoint("metrics.json.gz")
    assert record is not None and record["format"] == "compressed" and record["note"] is None
    assert sorted(record["metadata"]) == ["metrics.json/epoch", "metrics.json/loss", "metrics.json/lr"]
    result = compare.compare_runs([a, b])
    assert result.grade == compare.REPRODUCED and not result.value_differences, result.sentence


def test_a_differing_value_inside_a_gzipped_file_is_named(tmp_path: Path) -> None:
    other = {**METRICS, "lr": 0.002}
    a = make_run(
        tmp_path,
        "20261128T030000Z-aaaaaa",
        {"metrics.json.gz": gzipped(json.dumps(METRICS).encode(), mtime=1)},
    )
    b = make_run(
        tmp_path, "20261128T030100Z-bbbbbb", {"metrics.json.gz": gzipped(json.dumps(other).encode(), mtime=1)}
    )
    result = compare.compare_runs([a, b])
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert [(e["checkpoint"], e["name"], e["a"], e["b"]) for e in result.value_differences] == [
        ("metrics.json.gz", "metrics.json/lr", 0.001, 0.002)
    ]


def test_bzip2_and_xz_hold_files_the_table_reads_too(tmp_path: Path) -> None:
    array = io.BytesIO()
    np.save(array, np.arange(6, dtype=np.float32).reshape(2, 3))
    (tmp_path / "model.npy.xz").write_bytes(lzma.compress(array.getvalue()))
    (tmp_path / "rows.csv.bz2").write_bytes(bz2.compress(b"step,loss\n1,0.5\n"))
    (tmp_path / "history").write_bytes(gzip.compress(b'{"acc": 0.75}'))  # no suffix: known by its magic
    digest = hash_checkpoint(tmp_path / "model.npy.xz", relative_to=tmp_path)
    assert [(t.name, t.dtype, t.shape) for t in digest.tensors] == [("model.npy", "float32", (2, 3))]
    tensors, _ = load_tensors(tmp_path / "model.npy.xz")
    assert torch.equal(tensors["model.npy"], torch.arange(6, dtype=torch.float32).reshape(2, 3))
    assert load_values(tmp_path / "rows.csv.bz2") == {"rows.csv/0.step": "1", "rows.csv/0.loss": "0.5"}
    assert load_values(tmp_path / "history") == {"history/acc": 0.75}
    assert format_of(tmp_path / "model.npy.xz") == "compressed"
    (tmp_path / "empty.bz2").write_bytes(bz2.compress(b""))
    assert format_of(tmp_path / "empty.bz2") == "compressed"
    (tmp_path / "notes.txt").write_bytes(b"BZh9 is how a bzip2 stream begins")
    assert format_of(tmp_path / "notes.txt") == "file"


def test_a_tar_gz_stays_a_tar(tmp_path: Path) -> None:
    import tarfile

    path = tmp_path / "ckpt.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo("config.json")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"{}"))
    assert format_of(path) == "tar"


def test_a_gzip_bomb_is_refused_as_it_decompresses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    member = gzip.compress(b"\0" * (64 << 20), compresslevel=9)  # deflate's best: about 1,030 times
    bomb = tmp_path / "zeros.json.gz"
    bomb.write_bytes(member * 4)  # four gzip members: 256 MiB from 250 KiB, under the ratio
    assert bomb.stat().st_size < 300_000
    monkeypatch.setattr(_compressed, "MAX_DECOMPRESSED_BYTES", 32 << 20)  # a bound this test can afford
    digest = hash_checkpoint(bomb, relative_to=tmp_path)
    assert digest.format == "file" and digest.content_sha256 == digest.file_sha256
    assert digest.note is not None and "decompresses to over 32.0 MiB, the limit" in digest.note
    with pytest.raises(UsageError, match=r"zeros\.json\.gz is refused: it decompresses to over"):
        hash_checkpoint(bomb, relative_to=tmp_path, strict=True)
    with pytest.raises(UsageError, match="cannot be read safely"):
        load_tensors(bomb)


def test_a_compressed_checkpoint_the_readers_refuse_is_still_one_that_may_hold_the_model() -> None:
    from reprobox.compare._unreadable import may_hold_tensors

    assert may_hold_tensors("model.pt.gz") and may_hold_tensors("weights.npy.xz")
    assert not may_hold_tensors("train.log.gz")


def test_a_bzip2_bomb_is_refused_by_its_ratio(tmp_path: Path) -> None:
    bomb = tmp_path / "zeros.json.bz2"
    bomb.write_bytes(bz2.compress(b"\0" * (64 << 20)))  # about 45 bytes for each MiB
    with pytest.raises(UsageError, match=r"over 1\.0 MiB, the limit \(at most 1100 times the file"):
        hash_checkpoint(bomb, relative_to=tmp_path, strict=True)


def test_a_damaged_stream_is_the_files_note(tmp_path: Path) -> None:
    data = bytearray(gzipped(json.dumps(METRICS).encode(), mtime=0))
    data[-8] ^= 0xFF  # the CRC of what it holds
    path = tmp_path / "metrics.json.gz"
    path.write_bytes(bytes(data))
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert (
        digest.format == "file"
        and digest.note is not None
        and "not a readable compressed file" in digest.note
    )
    with pytest.raises(
        UsageError, match=r"is not a readable compressed file \(its stream does not decompress"
    ):
        load_values(path)


# --- Keras ----------------------------------------------------------------------------------------


def keras_zip(
    path: Path, *, when: tuple[int, int, int, int, int, int], date_saved: str, units: int = 4
) -> Path:
    """A ``model.keras`` as Keras 3's saving_lib writes it: metadata, config, then the HDF5 weights."""
    metadata = {"keras_version": "3.6.0", "date_saved": date_saved}
    config = {"module": "keras", "class_name": "Sequential", "config": {"layers": [{"units": units}]}}
    members = {
        "metadata.json": json.dumps(metadata).encode(),
        "config.json": json.dumps(config).encode(),
        "model.weights.h5": b"\x89HDF\r\n\x1a\n" + bytes(64),
    }
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=when), data)
    return path


def test_a_keras_file_is_read_member_by_member_once_its_weights_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def plan(path: Path) -> _Content:  # a stand-in for the HDF5 reader: the weights as one value
        return _Content(
            "h5", metadata=_metadata_digests([("kernel", path.read_bytes().hex())]), values_only=True
        )

    row = _readers.Reader(
        format="h5",
        what="HDF5 stand-in",
        yields="values",
        detect=lambda path: path.name.endswith(".h5"),
        plan=plan,
        load=lambda path: ({}, {"kernel": path.read_bytes().hex()}),
        bounds="none",
    )
    monkeypatch.setattr(_readers, "READERS", (row, *_readers.READERS))
    first = keras_zip(tmp_path / "a.keras", when=(2026, 11, 28, 3, 0, 0), date_saved="2026-11-28@03:00:00")
    again = keras_zip(tmp_path / "b.keras", when=(2026, 11, 28, 3, 1, 0), date_saved="2026-11-28@03:01:00")
    wider = keras_zip(
        tmp_path / "c.keras", when=(2026, 11, 28, 3, 0, 0), date_saved="2026-11-28@03:00:00", units=8
    )
    assert format_of(first) == "zip"
    a, b, c = (hash_checkpoint(p, relative_to=tmp_path) for p in (first, again, wider))
    assert a.format == "zip" and a.note is None
    assert set(a.metadata) == {
        "metadata.json/keras_version",
        "metadata.json/date_saved",
        "config.json/module",
        "config.json/class_name",
        "config.json/config.layers.0.units",
        "model.weights.h5/kernel",
    }
    # the zip's member times are no value; the time Keras wrote into metadata.json is one
    assert {k for k in a.metadata if a.metadata[k] != b.metadata[k]} == {"metadata.json/date_saved"}
    assert {k for k in a.metadata if a.metadata[k] != c.metadata[k]} == {"config.json/config.layers.0.units"}
    assert load_values(first)["metadata.json/date_saved"] == "2026-11-28@03:00:00"


# --- which bytes are accounted for ------------------------------------------------------------------


def test_a_gzip_of_a_file_read_whole_is_accounted_for_whole(tmp_path: Path) -> None:
    array = io.BytesIO()
    np.save(array, np.arange(6, dtype=np.float32))
    (tmp_path / "model.npy.gz").write_bytes(gzipped(array.getvalue(), mtime=7, name="model.npy"))
    record = hash_checkpoint(tmp_path / "model.npy.gz", relative_to=tmp_path)
    assert record.unaccounted is not None and record.unaccounted.bytes == 0, record.unaccounted


def test_bytes_after_a_gzip_stream_are_never_container_bytes(tmp_path: Path) -> None:
    text = json.dumps(METRICS).encode()
    files = [gzipped(text, mtime=run, name="metrics.json") + f"PAYLOAD {run}".encode() for run in (0, 1)]
    a = make_run(tmp_path, "20261128T030000Z-aaaaaa", {"metrics.json.gz": files[0]})
    b = make_run(tmp_path, "20261128T030100Z-bbbbbb", {"metrics.json.gz": files[1]})
    record = a.checkpoint("metrics.json.gz")
    assert record is not None and record["format"] == "file" and "does not decompress" in record["note"]
    result = compare.compare_runs([a, b])
    assert result.grade != compare.REPRODUCED, result.sentence
    assert "metrics.json.gz" not in result.format_only


@pytest.mark.parametrize(("suffix", "compress"), [(".bz2", bz2.compress), (".xz", lzma.compress)])
def test_bytes_after_a_bzip2_or_xz_stream_are_never_container_bytes(
    tmp_path: Path, suffix: str, compress: Callable[[bytes], bytes]
) -> None:
    # their readers stop at the stream's end without a word: what follows is no one's, so no layout
    body = compress(json.dumps(METRICS).encode())
    name = f"metrics.json{suffix}"
    a = make_run(tmp_path, "20261128T030000Z-aaaaaa", {name: body + b"PAYLOAD 0"})
    b = make_run(tmp_path, "20261128T030100Z-bbbbbb", {name: body + b"PAYLOAD 1"})
    record = a.checkpoint(name)
    assert record is not None and record["format"] == "compressed" and record["unaccounted"] is None
    result = compare.compare_runs([a, b])
    assert result.grade == compare.NO_VERDICT, result.sentence
    assert name not in result.format_only and "does not say which bytes it read" in result.sentence
