"""TensorStore's OCDBT databases (Orbax's checkpoints) read as their keys and values.

The databases are written by TensorStore itself (zarr v2 arrays compressed with zstd, as Orbax writes
them, and a zarr v3 array), or by hand (``tests.ocdbt_units``) where a field has to be hostile.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reprobox import compare
from reprobox.errors import UsageError
from reprobox.guest.hashing import hash_checkpoint, hash_outputs, load_tensors
from reprobox.guest.hashing._ocdbt import MAX_HEIGHT
from tests import ocdbt_units as units
from tests.unit.test_verdicts import make_run

ts = pytest.importorskip("tensorstore")

WEIGHTS = {
    "dense.kernel": np.arange(35, dtype=np.float32).reshape(5, 7) / 7,
    "dense.bias": np.linspace(-1, 1, 7, dtype=np.float32),
    "step": np.array(3, dtype=np.int64),
}


def write(folder: Path, weights: dict[str, np.ndarray[Any, Any]], *, reopen: bool = False) -> None:
    """Each array as Orbax saves it: zarr v2, zstd, into one OCDBT database (chunks cut the kernel);
    ``reopen``: arrays already there written over."""
    base = {"driver": "ocdbt", "base": f"file://{folder}/"}
    for name, value in weights.items():
        chunks = [2, 3] if value.ndim == 2 else list(value.shape)
        spec = {
            "driver": "zarr",
            "kvstore": {**base, "path": f"{name}/"},
            "metadata": {
                "compressor": {"id": "zstd", "level": 1},
                "chunks": chunks,
                "shape": list(value.shape),
                "dtype": value.dtype.str,
            },
            "create": not reopen,
            "open": reopen,
        }
        ts.open(spec).result().write(value).result()


def write_orbax_shaped(folder: Path, weights: dict[str, np.ndarray[Any, Any]]) -> None:
    """As ``StandardCheckpointer().save`` lays a save out: the arrays written into the process's
    database ``ocdbt.process_0/``, then copied into the root database at ``folder`` as Orbax merges them
    (``experimental_copy_range_to`` in one transaction: the root's tree points into the process's data
    files)."""
    write(folder / "ocdbt.process_0", weights)
    context = ts.Context()
    child, parent = (
        ts.KvStore.open({"driver": "ocdbt", "base": {"driver": "file", "path": f"{path}/"}}, context=context)
        for path in (folder / "ocdbt.process_0", folder)
    )
    txn = ts.Transaction(atomic=True)
    child.result().experimental_copy_range_to(parent.result().with_transaction(txn)).result()
    txn.commit_async().result()


def test_arrays_are_tensors_named_by_key_equal_to_what_tensorstore_reads(tmp_path: Path) -> None:
    write(tmp_path, WEIGHTS)
    v3 = {
        "shape": [4, 5],
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3, 2]}},
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd"}],
    }
    kvstore = {"driver": "ocdbt", "base": f"file://{tmp_path}/", "path": "v3/"}
    store = ts.open({"driver": "zarr3", "kvstore": kvstore, "metadata": v3, "create": True}).result()
    store.write(np.arange(20, dtype=np.float32).reshape(4, 5)).result()
    digest = hash_checkpoint(tmp_path / "manifest.ocdbt", relative_to=tmp_path)
    assert (digest.format, digest.reader) == ("ocdbt", "OCDBT database reader")
    assert {t.name: (t.dtype, t.shape) for t in digest.tensors} == {
        "dense.kernel": ("float32", (5, 7)),
        "dense.bias": ("float32", (7,)),
        "step": ("int64", ()),
        "v3": ("float32", (4, 5)),
    }
    assert "dense.kernel/.zarray/compressor.id" in digest.metadata and "commit_time_ns" in digest.metadata
    assert digest.unaccounted is not None and digest.unaccounted.none
    tensors, values = load_tensors(tmp_path / "manifest.ocdbt")
    for name, expected in {**WEIGHTS, "v3": np.arange(20, dtype=np.float32).reshape(4, 5)}.items():
        assert np.array_equal(tensors[name].numpy(), expected), name
    assert values["dense.kernel/.zarray/chunks"] == [2, 3]
    now = datetime.now(timezone.utc).timestamp() * 1e9
    assert abs(values["commit_time_ns"] - now) < 600e9  # nanoseconds since the epoch: a clock reading
    for data_file in (tmp_path / "d").iterdir():
        part = hash_checkpoint(data_file, relative_to=tmp_path)
        assert (part.format, part.part_of, part.tensors) == ("ocdbt", ("manifest.ocdbt",), ())


def _runs(
    tmp_path: Path, first: dict[str, Any], second: dict[str, Any], writer: Any = write
) -> compare.Comparison:
    start = datetime.now(timezone.utc) - timedelta(seconds=5)
    window = tuple((start + timedelta(seconds=s)).isoformat(timespec="milliseconds") for s in (0, 120))
    runs = [
        make_run(tmp_path, run_id, lambda out, w=weights: writer(out / "ckpt", w), window=window)  # type: ignore[misc]
        for run_id, weights in (("20261123T120000Z-aaaaaa", first), ("20261123T120105Z-bbbbbb", second))
    ]
    return compare.compare_runs(runs)


def test_equal_contents_under_other_random_ids_are_reproduced(tmp_path: Path) -> None:
    result = _runs(tmp_path, WEIGHTS, WEIGHTS)
    assert (result.verdict, result.grade) == (compare.IDENTICAL, compare.REPRODUCED), result.sentence
    assert not result.renamed and not result.one_sided and not result.unreadable
    assert {(e["name"], e["reason"]) for e in result.run_specific} == {
        ("commit_time_ns", "a wall-clock timestamp")
    }
    assert result.database_parts and all("/d/" in path for path in result.database_parts)
    rows = {row["path"]: row["status"] for row in result.checkpoints}
    assert rows["ckpt/manifest.ocdbt"] == "run-specific"
    assert {rows[path] for path in result.database_parts} == {"in database"}
    assert result.coverage is not None and result.coverage.tensors == len(WEIGHTS)


def test_a_changed_weight_is_named(tmp_path: Path) -> None:
    changed = dict(WEIGHTS, **{"dense.kernel": WEIGHTS["dense.kernel"].copy()})
    changed["dense.kernel"][4, 6] += 1
    result = _runs(tmp_path, WEIGHTS, changed)
    assert (result.verdict, result.grade) == (compare.DIFFERENT, compare.NOT_REPRODUCIBLE)
    assert [(d["checkpoint"], d["name"]) for d in result.differences] == [
        ("ckpt/manifest.ocdbt", "dense.kernel")
    ]
    assert "dense.kernel" in result.sentence and "/d/" not in result.sentence
    assert not result.one_sided and not result.renamed


def test_a_process_database_the_root_holds_is_compared_through_the_root(tmp_path: Path) -> None:
    write_orbax_shaped(tmp_path, WEIGHTS)
    records = {d.path: d for d in hash_outputs(tmp_path, [])}
    root, process = records["manifest.ocdbt"], records["ocdbt.process_0/manifest.ocdbt"]
    assert {t.name for t in root.tensors} == set(WEIGHTS)
    assert (process.format, process.tensors, list(process.metadata)) == ("ocdbt", (), ["commit_time_ns"])
    assert process.note == "14 of its 14 keys compared in ../manifest.ocdbt"
    assert process.unaccounted is not None and process.unaccounted.none
    parts = [d for path, d in records.items() if "/d/" in f"/{path}"]
    assert {part.part_of for part in parts} >= {("ocdbt.process_0/manifest.ocdbt", "manifest.ocdbt")}
    assert all(part.unaccounted is not None and part.unaccounted.none for part in parts)
    tensors, values = load_tensors(tmp_path / "ocdbt.process_0" / "manifest.ocdbt")
    assert (dict(tensors), list(values)) == ({}, ["commit_time_ns"])


def test_an_orbax_shaped_save_counts_each_array_once(tmp_path: Path) -> None:
    same = _runs(tmp_path / "same", WEIGHTS, WEIGHTS, write_orbax_shaped)
    assert (same.verdict, same.grade) == (compare.IDENTICAL, compare.REPRODUCED), same.sentence
    assert same.coverage is not None and same.coverage.tensors == len(WEIGHTS)
    assert not same.renamed and not same.one_sided and not same.unreadable
    changed = dict(WEIGHTS, **{"dense.kernel": WEIGHTS["dense.kernel"] + 1})
    result = _runs(tmp_path / "changed", WEIGHTS, changed, write_orbax_shaped)
    assert [(d["checkpoint"], d["name"]) for d in result.differences] == [
        ("ckpt/manifest.ocdbt", "dense.kernel")
    ]
    assert "1 tensor differs" in result.sentence, result.sentence


def test_a_key_only_the_process_database_holds_is_compared_there(tmp_path: Path) -> None:
    """Written into the process's database after the merge: a new array, and an array written over (its
    chunk now at another place than the one the root points at)."""

    def save(folder: Path, extra: dict[str, Any]) -> None:
        write_orbax_shaped(folder, WEIGHTS)
        write(folder / "ocdbt.process_0", extra)
        write(folder / "ocdbt.process_0", {"dense.bias": -WEIGHTS["dense.bias"]}, reopen=True)

    process = tmp_path / "one" / "ocdbt.process_0" / "manifest.ocdbt"
    save(process.parent.parent, {"extra": np.ones(4, dtype=np.float32)})
    digest = hash_checkpoint(process, relative_to=tmp_path / "one")
    assert {t.name for t in digest.tensors} == {"dense.bias", "extra"}
    assert "extra/.zarray/shape" in digest.metadata and "dense.kernel/.zarray/shape" not in digest.metadata
    tensors, _values = load_tensors(process)
    assert np.array_equal(tensors["dense.bias"].numpy(), -WEIGHTS["dense.bias"])
    ones, zeros = np.ones(4, dtype=np.float32), np.zeros(4, dtype=np.float32)
    result = _runs(tmp_path / "runs", {"extra": ones}, {"extra": zeros}, save)
    assert [(d["checkpoint"], d["name"]) for d in result.differences] == [
        ("ckpt/ocdbt.process_0/manifest.ocdbt", "extra")
    ]
    assert "1 tensor differs" in result.sentence, result.sentence


def test_a_data_file_no_database_reaches_is_a_plain_file(tmp_path: Path) -> None:
    write(tmp_path, {"w": np.ones(3, dtype=np.float32)})
    stray = tmp_path / "d" / ("f" * 32)
    stray.write_bytes(b"not reached")
    digest = hash_checkpoint(stray, relative_to=tmp_path)
    assert (digest.format, digest.part_of) == ("file", ())


def test_bytes_no_node_reaches_leave_a_data_file_unaccounted(tmp_path: Path) -> None:
    for name, data in units.small_database().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    with (tmp_path / units.DATA_FILE).open("ab") as appended:
        appended.write(b"a payload")
    records = {d.path: d for d in hash_outputs(tmp_path, [])}
    part = records[units.DATA_FILE]
    assert (
        part.format == "ocdbt"
        and part.unaccounted is not None
        and part.unaccounted.bytes == len(b"a payload")
    )
    tensors, values = load_tensors(tmp_path / "manifest.ocdbt")
    assert np.array_equal(tensors["w"].numpy(), np.arange(9, dtype=np.float32).reshape(3, 3))
    assert values["note"] == "saved by hand"


NODE = units.leaf([], [(b"k", b"v")])


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ({"manifest.ocdbt": units.manifest(["../x"], (0, 0, 10))}, "leaves the database's folder"),
        ({"manifest.ocdbt": units.manifest(["/etc/passwd"], (0, 0, 10))}, "leaves the database's folder"),
        (
            {"manifest.ocdbt": units.manifest([units.DATA_FILE], (0, 0, 999)), units.DATA_FILE: NODE},
            "past the end",
        ),
        (
            {
                "manifest.ocdbt": units.manifest([units.DATA_FILE], (0, 0, len(NODE)))[:-1] + b"\0",
                units.DATA_FILE: NODE,
            },
            "CRC-32C",
        ),
        ({"manifest.ocdbt": units.manifest([units.DATA_FILE], (0, 0, len(NODE)))[:40]}, "another length"),
        (
            {
                "manifest.ocdbt": units.manifest([units.DATA_FILE], (0, 0, len(NODE)), height=1),
                units.DATA_FILE: NODE,
            },
            "height 0, not 1",
        ),
        (
            {
                "manifest.ocdbt": units.manifest([units.DATA_FILE], (0, 0, len(NODE)), height=MAX_HEIGHT + 1),
                units.DATA_FILE: NODE,
            },
            "levels high",
        ),
    ],
    ids=["parent-path", "absolute-path", "past-the-end", "bad-crc", "cut-short", "wrong-height", "too-deep"],
)
def test_hostile_databases_are_refused_in_one_sentence(
    tmp_path: Path, files: dict[str, bytes], why: str
) -> None:
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    digest = hash_checkpoint(tmp_path / "manifest.ocdbt", relative_to=tmp_path)
    assert digest.format == "file" and digest.note is not None and why in digest.note
    assert "\n" not in digest.note
    with pytest.raises(UsageError, match=r"is not a readable OCDBT database|cannot be read safely"):
        load_tensors(tmp_path / "manifest.ocdbt")
    for data_file in (tmp_path / "d").glob("*") if (tmp_path / "d").is_dir() else ():
        assert hash_checkpoint(data_file, relative_to=tmp_path).part_of == ()  # no database read it


def test_a_node_that_holds_itself_is_refused(tmp_path: Path) -> None:
    """An interior node whose child is itself: the heights must fall by one a level, so it is refused."""
    node = units.interior([units.DATA_FILE], 1, [(b"a", (0, 0, 0))])
    length = len(node)
    node = units.interior([units.DATA_FILE], 1, [(b"a", (0, 0, length))])
    assert len(node) == length
    (tmp_path / "d").mkdir()
    (tmp_path / units.DATA_FILE).write_bytes(node)
    (tmp_path / "manifest.ocdbt").write_bytes(units.manifest([units.DATA_FILE], (0, 0, length), height=1))
    digest = hash_checkpoint(tmp_path / "manifest.ocdbt", relative_to=tmp_path)
    assert digest.format == "file" and digest.note is not None and "height 1, not 0" in digest.note


def test_a_node_decoding_past_the_database_cap_is_refused(tmp_path: Path) -> None:
    """TensorStore's own node, zstd-compressed, read under a manifest whose decoded-size cap it exceeds."""
    write(tmp_path, {"w": np.arange(64, dtype=np.float32)})
    from reprobox.guest.hashing._ocdbt_format import manifest

    _config, versions, _nodes = manifest((tmp_path / "manifest.ocdbt").read_bytes(), "m")
    root = versions[-1].root
    assert root is not None
    (tmp_path / "manifest.ocdbt").write_bytes(
        units.manifest([root.path], (0, root.offset, root.length), max_decoded=16)
    )
    digest = hash_checkpoint(tmp_path / "manifest.ocdbt", relative_to=tmp_path)
    assert digest.format == "file" and digest.note is not None and "over the limit" in digest.note
    assert "\n" not in digest.note


def test_a_chunk_that_does_not_decode_to_its_size_leaves_the_database_compared_as_bytes(
    tmp_path: Path,
) -> None:
    node = units.leaf(
        [units.DATA_FILE], [(b"w/.zarray", units.ZARRAY), (b"w/0.0", (0, 0, 4)), (b"w/1.0", b"x")]
    )
    (tmp_path / "d").mkdir()
    (tmp_path / units.DATA_FILE).write_bytes(b"abcd" + node)
    (tmp_path / "manifest.ocdbt").write_bytes(units.manifest([units.DATA_FILE], (0, 4, len(node))))
    digest = hash_checkpoint(tmp_path / "manifest.ocdbt", relative_to=tmp_path)
    assert (
        digest.format == "file"
        and digest.note is not None
        and "chunk w/0.0 holds 4 bytes, not 24" in digest.note
    )
