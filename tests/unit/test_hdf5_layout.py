"""Which bytes of an HDF5 file are accounted for: every structure the reader parses (superblock, object
headers, heaps, B-tree nodes, chunk indexes, free-space managers) as framing, raw data and attributes as
content, nothing after the superblock's end-of-file address; the rest (libhdf5's unused metadata slack)
is unaccounted, equal in two runs that write alike and never excused when it differs."""

from __future__ import annotations

import io
import struct
import time
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from reprobox import compare
from reprobox.guest.hashing import hash_checkpoint
from tests.unit.test_byte_accounting import assert_not_reproduced
from tests.unit.test_verdicts import two_runs

EOF_AT = 8 + 4 + 8 + 8  # the end-of-file address of a version 2 or 3 superblock of 8-byte widths


def keras_shaped(path: Path, *, latest: bool, track_order: bool = False, times: bool = False) -> bytes:
    """Weights as Keras lays them out: groups of layers, numbered variables, string attributes (links
    and attributes indexed by creation order too, with ``track_order``)."""
    libver = "latest" if latest else "earliest"
    with h5py.File(path, "w", libver=libver, track_order=track_order) as f:
        f.attrs["keras_version"] = "3.6.0"
        for number in range(12):
            group = f.create_group(f"layers/dense_{number}/vars")
            group.attrs["name"] = f"dense_{number}"
            group.create_dataset("0", data=np.full((8, 4), number, np.float32), track_times=times)
            chunked = {"chunks": (4,), "compression": "gzip"}
            group.create_dataset("1", data=np.arange(16, dtype=np.float64) * number, **chunked)
        for number in range(12):
            f.attrs[f"note_{number}"] = "x" * 20  # past what the header holds: dense attributes
    return path.read_bytes()


@pytest.mark.parametrize(("latest", "track_order"), [(False, False), (True, False), (False, True)])
def test_every_structure_is_accounted_for_and_the_rest_is_zeros_no_structure_declares(
    tmp_path: Path, latest: bool, track_order: bool
) -> None:
    data = keras_shaped(tmp_path / "model.h5", latest=latest, track_order=track_order)
    record = hash_checkpoint(tmp_path / "model.h5", relative_to=tmp_path)
    assert record.unaccounted is not None, record.note
    assert record.unaccounted.bytes < len(data) // 10, record.unaccounted
    assert record.unaccounted.count <= len(record.unaccounted.ranges)  # every range listed, and checked
    for start, end in record.unaccounted.ranges:
        assert not data[start:end].strip(b"\x00"), (start, end)


def test_bytes_appended_after_the_file_are_not_reproduced(tmp_path: Path) -> None:
    body = keras_shaped(tmp_path / "body.h5", latest=False)

    def write(out: Path, run: int) -> None:
        (out / "model.weights.h5").write_bytes(body + f"SECOND PAYLOAD {run}".encode())

    result = two_runs(tmp_path, write)
    assert_not_reproduced(result, "model.weights.h5")
    write(tmp_path, 0)
    record = hash_checkpoint(tmp_path / "model.weights.h5", relative_to=tmp_path)
    assert record.unaccounted is not None
    assert record.unaccounted.ranges[-1] == (len(body), len(body) + 16)


def test_a_payload_in_the_slack_between_structures_is_not_reproduced(tmp_path: Path) -> None:
    body = keras_shaped(tmp_path / "body.h5", latest=True)
    record = hash_checkpoint(tmp_path / "body.h5", relative_to=tmp_path)
    assert record.unaccounted is not None
    start, end = max(record.unaccounted.ranges, key=lambda span: span[1] - span[0])
    assert end - start >= 16

    def write(out: Path, run: int) -> None:
        data = bytearray(body)
        data[start : start + 16] = f"HIDDEN PAYLOAD {run}".encode()
        (out / "model.weights.h5").write_bytes(data)

    result = two_runs(tmp_path, write)
    assert_not_reproduced(result, "model.weights.h5")


def test_nothing_after_the_superblocks_end_of_file_address_is_accounted_for(tmp_path: Path) -> None:
    body = keras_shaped(tmp_path / "model.h5", latest=True)
    (declared_end,) = struct.unpack_from("<Q", body, EOF_AT)
    assert declared_end == len(body)
    data = bytearray(body)
    struct.pack_into("<Q", data, EOF_AT, len(body) - 100)  # the last 100 bytes now lie past its end
    (tmp_path / "model.h5").write_bytes(data)
    record = hash_checkpoint(tmp_path / "model.h5", relative_to=tmp_path)
    assert record.unaccounted is not None
    assert record.unaccounted.ranges[-1] == (len(body) - 100, len(body))


def keras_file(weights: bytes, second: int) -> bytes:
    """A ``.keras`` file as Keras writes it: a zip of stored members, the HDF5 weights among them."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for name, data in (("config.json", b'{"name": "dense"}'), ("model.weights.h5", weights)):
            archive.writestr(zipfile.ZipInfo(name, (2026, 11, 28, 3, 0, second)), data)
    return out.getvalue()


def test_hdf5_weights_stored_in_a_keras_zip_are_accounted_for_in_place(tmp_path: Path) -> None:
    first = keras_shaped(tmp_path / "first.h5", latest=True, times=True)
    time.sleep(1.1)  # object headers record their times in whole seconds
    second = keras_shaped(tmp_path / "second.h5", latest=True, times=True)
    assert first != second

    def write(out: Path, run: int) -> None:
        (out / "model.keras").write_bytes(keras_file([first, second][run], 2 * run))

    result = two_runs(tmp_path / "equal", write)
    assert result.grade == compare.REPRODUCED, result.sentence
    assert result.format_only == ["model.keras"]

    record = hash_checkpoint(tmp_path / "first.h5", relative_to=tmp_path)
    assert record.unaccounted is not None
    start, end = max(record.unaccounted.ranges, key=lambda span: span[1] - span[0])
    assert end - start >= 16

    def hidden(out: Path, run: int) -> None:
        weights = bytearray(first)
        weights[start : start + 16] = f"HIDDEN PAYLOAD {run}".encode()
        (out / "model.keras").write_bytes(keras_file(bytes(weights), 0))

    assert_not_reproduced(two_runs(tmp_path / "hidden", hidden), "model.keras")
