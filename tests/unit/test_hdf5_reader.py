"""HDF5 files as h5py and Keras write them, read by reprobox's own reader (no h5py in the guest).

Every file here is written by h5py itself, in the layouts it and Keras write: ``libver='earliest'`` (h5py's
default: superblock 0, version 1 object headers, symbol-table groups, B-tree chunk indexes) and
``'latest'`` (superblock 3, version 2 headers, link messages, dense links and attributes in fractal heaps,
single-chunk and fixed-array indexes); contiguous, compact and chunked data, deflate and shuffle, fill
values where chunks were never written. Each dataset read must equal h5py's own reading of it.
"""

from __future__ import annotations

import hashlib
import json
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from reprobox import compare
from reprobox.guest.hashing import format_of, hash_checkpoint, load_tensors, load_values
from tests.unit.test_archives import make_run

h5py = pytest.importorskip("h5py")

LIBVERS = ["earliest", "latest"]


def _write_datasets(path: Path, libver: str, *, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w", libver=libver) as f:
        f["plain"] = rng.standard_normal((3, 5)).astype(np.float32)
        f["big_endian"] = np.arange(6, dtype=">f8").reshape(2, 3)
        f["half"] = np.linspace(-2, 2, 7).astype(np.float16)
        for dtype in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"):
            f[f"ints/{dtype}"] = np.arange(-3, 4).astype(dtype)
        f["flags"] = np.array([True, False, True, True])
        f["scalar"] = np.float64(2.5)
        f["empty"] = np.zeros((0, 3), dtype=np.float32)
        f["names"] = np.array([b"ab", b"cde", b""], dtype="S4")
        f.create_dataset("compact", data=np.arange(10, dtype=np.int32), **_compact())
        f.create_dataset(
            "chunked", data=rng.standard_normal((37, 23)), chunks=(8, 5), compression="gzip", shuffle=True
        )
        f.create_dataset("one_chunk", data=np.arange(50, dtype=np.int16), chunks=(50,), compression="gzip")
        f.create_dataset("plain_chunks", data=np.arange(40, dtype=np.uint8).reshape(8, 5), chunks=(3, 2))
        sparse = f.create_dataset("sparse", shape=(10, 10), dtype=np.int32, chunks=(4, 4), fillvalue=7)
        sparse[0:4, 0:4] = 1  # the other chunks are never written: they hold the fill value
        f.create_dataset("unwritten", shape=(4,), dtype=np.float32, fillvalue=-1.5)
        deep = f.create_group("a/b/c/d")
        deep["leaf"] = np.arange(3, dtype=np.int64)
    return path


def _compact() -> dict[str, Any]:
    from h5py import h5d, h5p

    plist = h5p.create(h5p.DATASET_CREATE)
    plist.set_layout(h5d.COMPACT)
    return {"dcpl": plist}


def _h5py_datasets(path: Path) -> dict[str, np.ndarray[Any, Any]]:
    found: dict[str, np.ndarray[Any, Any]] = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, obj: found.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None
        )
    return {name: np.asarray(value) for name, value in found.items()}


def _le_bytes(array: np.ndarray[Any, Any]) -> bytes:
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()


@pytest.mark.parametrize("libver", LIBVERS)
def test_every_dataset_reads_as_h5py_reads_it(tmp_path: Path, libver: str) -> None:
    path = _write_datasets(tmp_path / "data.h5", libver)
    expected = _h5py_datasets(path)
    digest = hash_checkpoint(path, relative_to=tmp_path, strict=True)
    assert digest.format == "hdf5" and digest.reader == "HDF5 reader" and digest.note is None
    assert {t.name for t in digest.tensors} == set(expected)
    tensors, _values = load_tensors(path)
    for tensor_digest in digest.tensors:
        array = expected[tensor_digest.name]
        assert tensor_digest.shape == array.shape, tensor_digest.name
        assert tensor_digest.sha256 == hashlib.sha256(_le_bytes(array)).hexdigest(), tensor_digest.name
        if array.dtype.kind == "S":
            assert tensor_digest.dtype.startswith("numpy:")
            continue
        assert tensor_digest.dtype == array.dtype.name, tensor_digest.name
        read = tensors[tensor_digest.name].numpy()
        assert read.dtype == array.dtype.newbyteorder("="), tensor_digest.name
        assert np.array_equal(read, array), tensor_digest.name
    assert np.array_equal(tensors["sparse"].numpy()[5:, 5:], np.full((5, 5), 7))
    assert np.array_equal(tensors["unwritten"].numpy(), np.full(4, -1.5, dtype=np.float32))


@pytest.mark.parametrize("libver", LIBVERS)
def test_attributes_of_each_type_are_values(tmp_path: Path, libver: str) -> None:
    path = tmp_path / "attrs.h5"
    with h5py.File(path, "w", libver=libver) as f:
        f.attrs["int"] = np.int64(-3)
        f.attrs["float"] = 0.125
        f.attrs["half"] = np.float16(1.5)
        f.attrs["flag"] = np.bool_(True)
        f.attrs["text"] = "héllo"  # a variable-length UTF-8 string
        f.attrs["fixed"] = np.bytes_(b"abc")
        f.attrs["vector"] = np.arange(3, dtype=np.uint16)
        f.attrs["matrix"] = np.eye(2, dtype=np.float32)
        f.attrs["words"] = ["relu", "softmax"]
        f.attrs["nothing"] = h5py.Empty("f4")
        group = f.create_group("model")
        group.attrs["name"] = "dense"
        group["w"] = np.ones(2)
        group["w"].attrs["trainable"] = np.bool_(False)
    values = load_values(path)
    assert values == {
        "@int": -3,
        "@float": 0.125,
        "@half": 1.5,
        "@flag": True,
        "@text": "héllo",
        "@fixed": "abc",
        "@vector": [0, 1, 2],
        "@matrix": [[1.0, 0.0], [0.0, 1.0]],
        "@words": ["relu", "softmax"],
        "@nothing": None,
        "model@name": "dense",
        "model/w@trainable": False,
    }
    digest = hash_checkpoint(path, relative_to=tmp_path, strict=True)
    assert set(digest.metadata) == set(values)


def test_many_links_and_attributes_use_dense_storage_and_read_alike(tmp_path: Path) -> None:
    paths = {}
    for libver in LIBVERS:
        path = paths[libver] = tmp_path / f"{libver}.h5"
        with h5py.File(path, "w", libver=libver) as f:
            group = f.create_group("many")
            for i in range(1500):  # past a fractal heap's first direct blocks and a B-tree's first leaf
                group[f"layer_{i:04d}_with_a_longer_name"] = np.array([i], dtype=np.int32)
            for i in range(40):
                group.attrs[f"attribute_{i}"] = i
    raw = paths["latest"].read_bytes()
    assert (
        b"FRHP" in raw and b"BTHD" in raw and b"FHIB" in raw
    )  # a fractal heap with indirect blocks, a B-tree
    earliest, latest = (hash_checkpoint(p, relative_to=tmp_path, strict=True) for p in paths.values())
    assert earliest.note is None and latest.note is None
    assert len(latest.tensors) == 1500 and len(latest.metadata) == 40
    assert earliest.content_sha256 == latest.content_sha256 and earliest.metadata == latest.metadata
    tensors, values = load_tensors(paths["latest"])
    assert int(tensors["many/layer_1234_with_a_longer_name"][0]) == 1234
    assert values["many@attribute_39"] == 39


def _keras_weights(path: Path, *, kernel: np.ndarray[Any, Any] | None = None) -> Path:
    """What Keras 3's ``save_weights`` (H5IOStore) writes: a group per layer, its variables by index, each
    ``vars`` group naming its layer."""
    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as f:
        dense = f.create_group("layers/dense/vars")
        dense.attrs["name"] = "first"
        dense["0"] = rng.standard_normal((4, 3)).astype(np.float32) if kernel is None else kernel
        dense["1"] = np.zeros(3, dtype=np.float32)
        f.create_group("layers/dropout/vars").attrs["name"] = "dropout"
        optimizer = f.create_group("optimizer/vars")
        optimizer.attrs["name"] = "adam"
        optimizer["0"] = np.array(3, dtype=np.int32)  # the iteration count
        optimizer["1"] = np.full((4, 3), 0.01, dtype=np.float32)
        f.create_group("vars").attrs["name"] = "sequential"
    return path


def test_a_keras_model_file_is_read_through_its_weights_member(tmp_path: Path) -> None:
    weights = _keras_weights(tmp_path / "model.weights.h5")
    archive = tmp_path / "model.keras"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("metadata.json", '{"keras_version": "3.15.1"}')
        z.writestr("config.json", '{"class_name": "Sequential"}')
        z.write(weights, "model.weights.h5")
    assert format_of(weights) == "hdf5"
    digest = hash_checkpoint(archive, relative_to=tmp_path, strict=True)
    assert digest.format == "zip" and digest.note is None
    assert {t.name for t in digest.tensors} == {
        "model.weights.h5/layers/dense/vars/0",
        "model.weights.h5/layers/dense/vars/1",
        "model.weights.h5/optimizer/vars/0",
        "model.weights.h5/optimizer/vars/1",
    }
    tensors, values = load_tensors(archive)
    assert values["model.weights.h5/layers/dense/vars@name"] == "first"
    assert values["model.weights.h5/vars@name"] == "sequential"
    with h5py.File(weights, "r") as f:
        assert torch.equal(
            tensors["model.weights.h5/layers/dense/vars/0"], torch.from_numpy(f["layers/dense/vars/0"][()])
        )


def _written(path: Path, data: np.ndarray, latest: bool) -> Path:
    """The data as h5py writes it: contiguous in the earliest format, or chunked and deflated."""
    if latest:
        with h5py.File(path, "w", libver="latest") as f:
            chunked = {"chunks": (2, 5), "compression": "gzip", "shuffle": True}
            f.create_dataset("layers/dense/vars/0", data=data, track_times=True, **chunked)
    else:
        with h5py.File(path, "w", track_order=False) as f:
            f.create_dataset("layers/dense/vars/0", data=data, track_times=True)
    return path


def test_the_same_data_written_at_other_times_and_layouts_compares_equal(tmp_path: Path) -> None:
    data = np.arange(60, dtype=np.float32).reshape(6, 10)
    first = [_written(tmp_path / f"first-{latest}.h5", data, latest) for latest in (False, True)]
    time.sleep(1.1)  # object headers record their times in whole seconds
    second = [_written(tmp_path / f"second-{latest}.h5", data, latest) for latest in (False, True)]
    records = [hash_checkpoint(p, relative_to=tmp_path, strict=True) for p in (*first, *second)]
    assert len({r.file_sha256 for r in records}) == 4
    assert len({(r.content_sha256, json.dumps(r.metadata, sort_keys=True)) for r in records}) == 1
    for run, (a, b) in enumerate(zip(first, second, strict=True)):  # the times are the format's stamps
        run_a = make_run(tmp_path / str(run), "20261128T030000Z-aaaaaa", {"model.weights.h5": a.read_bytes()})
        run_b = make_run(tmp_path / str(run), "20261128T030100Z-bbbbbb", {"model.weights.h5": b.read_bytes()})
        verdict = compare.compare_runs([run_a, run_b])
        assert verdict.grade == compare.REPRODUCED and not verdict.differences, verdict.sentence
        assert verdict.format_only == ["model.weights.h5"]


def test_equal_data_in_other_layouts_differs_in_the_slack_no_structure_declares(tmp_path: Path) -> None:
    # libhdf5 leaves the unused rest of a metadata block as zeros no structure declares: unaccounted,
    # equal in two runs of one job, but not when one file is written in another format
    data = np.arange(60, dtype=np.float32).reshape(6, 10)
    early, late = (_written(tmp_path / f"{latest}.h5", data, latest).read_bytes() for latest in (False, True))
    run_a = make_run(tmp_path, "20261128T030000Z-aaaaaa", {"model.weights.h5": early})
    run_b = make_run(tmp_path, "20261128T030100Z-bbbbbb", {"model.weights.h5": late})
    verdict = compare.compare_runs([run_a, run_b])
    assert verdict.grade == compare.NOT_REPRODUCIBLE and not verdict.differences, verdict.sentence
    assert [d["name"] for d in verdict.value_differences] == ["bytes no reader read"]


def test_one_differing_element_is_named_by_its_dataset_path(tmp_path: Path) -> None:
    kernel = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    changed = kernel.copy()
    changed[2, 1] += 1e-3
    same = _keras_weights(tmp_path / "a.h5", kernel=kernel).read_bytes()
    other = _keras_weights(tmp_path / "b.h5", kernel=changed).read_bytes()
    run_a = make_run(tmp_path, "20261128T030000Z-aaaaaa", {"model.weights.h5": same})
    run_b = make_run(tmp_path, "20261128T030100Z-bbbbbb", {"model.weights.h5": other})
    verdict = compare.compare_runs([run_a, run_b])
    assert verdict.grade == compare.NOT_REPRODUCIBLE
    (difference,) = verdict.differences
    assert difference["checkpoint"] == "model.weights.h5"
    assert difference["name"] == "layers/dense/vars/0"
    assert difference["differing"] == 1 and difference["max_abs"] > 0


@pytest.mark.slow  # imports Keras (on torch) and trains a tiny model
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Keras's own, on NumPy 2's copy keyword
def test_a_model_keras_saves_is_read_weight_by_weight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras")  # skips where Keras is not installed
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(3), keras.layers.BatchNormalization(), keras.layers.Dense(2)]
    )
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((8, 4)), np.ones((8, 2)), epochs=1, verbose=0)
    model.save(tmp_path / "model.keras")
    model.save_weights(tmp_path / "model.weights.h5")
    expected = _h5py_datasets(tmp_path / "model.weights.h5")
    assert "layers/dense/vars/0" in expected and "optimizer/vars/0" in expected
    for name, prefix in (("model.weights.h5", ""), ("model.keras", "model.weights.h5/")):
        digest = hash_checkpoint(tmp_path / name, relative_to=tmp_path, strict=True)
        assert digest.note is None
        assert {t.name for t in digest.tensors} == {prefix + n for n in expected}
        tensors, _ = load_tensors(tmp_path / name)
        for inner, array in expected.items():
            assert np.array_equal(tensors[prefix + inner].numpy(), array), inner


def test_a_chunk_index_in_pages_is_read_page_by_page(tmp_path: Path) -> None:
    # past 1,024 chunks the fixed array lists them in pages after its block, a page only once written
    path = tmp_path / "paged.h5"
    sparse = np.full(4000, 3, dtype=np.float32)
    sparse[3000] = 7
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("dense", data=np.arange(2049, dtype=np.float32), chunks=(2,), compression="gzip")
        f.create_dataset("sparse", shape=(4000,), dtype="f4", chunks=(1,), fillvalue=3)
        f["sparse"][3000] = 7
    tensors, _ = load_tensors(path)
    assert torch.equal(tensors["dense"], torch.arange(2049, dtype=torch.float32))
    assert torch.equal(tensors["sparse"], torch.from_numpy(sparse))
    record = hash_checkpoint(path, relative_to=tmp_path)
    assert record.unaccounted is not None and record.unaccounted.bytes < 2048, record.unaccounted
