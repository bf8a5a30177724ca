"""joblib.dump's files: each NumPy array's raw bytes follow its NumpyArrayWrapper in the pickle stream.

The safe pickle reader reads them without importing joblib: every array of a fitted scikit-learn model
is a tensor named by its place in the estimator, equal to what joblib.load gives, and every byte of
the file is accounted for (the pickle, the alignment padding as framing, the arrays as content).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="the sklearn extra: pip install -e '.[sklearn]'")
import joblib  # after the skip: scikit-learn brings it
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from reprobox import compare
from reprobox.guest.hashing import _pickle_joblib, _readers
from reprobox.guest.hashing._bounds import OverLimit
from reprobox.guest.hashing._pickle import read_pickle
from tests.unit.test_byte_accounting import assert_not_reproduced
from tests.unit.test_verdicts import two_runs


def _data() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    features = np.random.RandomState(0).rand(40, 4)
    return features, (features[:, 0] + features[:, 1] > 1).astype(np.int64)


def logistic() -> LogisticRegression:
    return LogisticRegression().fit(*_data())


def forest() -> RandomForestClassifier:
    return RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(*_data())


def pipeline() -> Pipeline:
    features, labels = _data()
    named = np.array(["no", "yes"], dtype=object)[labels]  # string labels: an array of objects
    return Pipeline([("scale", StandardScaler()), ("svc", SVC())]).fit(features, named)


def _expected_arrays(obj: object, prefix: str = "") -> dict[str, np.ndarray[Any, Any]]:
    """Every numeric array joblib.load gives, by the name the reader gives its place in the object."""
    found: dict[str, np.ndarray[Any, Any]] = {}
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "biufc":
        found[prefix.rstrip(".")] = obj
    elif isinstance(obj, dict):
        for key, value in obj.items():
            found.update(_expected_arrays(value, f"{prefix}{key}."))
    elif isinstance(obj, (list, tuple)):
        for index, value in enumerate(obj):
            found.update(_expected_arrays(value, f"{prefix}{index}."))
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        found.update(_expected_arrays(vars(obj), prefix))
    return found


@pytest.mark.parametrize("make", [logistic, pipeline])
def test_every_array_of_a_fitted_estimator_is_read_as_joblib_loads_it(tmp_path: Path, make: Any) -> None:
    path = tmp_path / "model.joblib"
    joblib.dump(make(), path)
    tensors, values = _readers.load(path)
    expected = _expected_arrays(joblib.load(path))
    assert expected and set(expected) <= set(tensors)
    for name, array in expected.items():
        assert np.array_equal(tensors[name].numpy(), array), name
    content = _readers.plan(path)
    assert content.format == "pickle" and content.layout is not None
    assert content.layout.whole_file and content.layout.framing  # the alignment padding is framing
    assert values["__class__"] in (
        "sklearn.linear_model._logistic.LogisticRegression",
        "sklearn.pipeline.Pipeline",
    )


def test_a_forests_trees_and_their_record_arrays_are_read(tmp_path: Path) -> None:
    path = tmp_path / "forest.joblib"
    model = forest()
    joblib.dump(model, path)
    tensors, _values = _readers.load(path)
    nodes = model.estimators_[0].tree_.__getstate__()["nodes"]  # a record dtype: read as its bytes
    read = tensors["estimators_.0.tree_.nodes"].numpy()
    assert read.shape == (*nodes.shape, nodes.dtype.itemsize)
    assert read.tobytes() == nodes.tobytes()
    tree_values = model.estimators_[0].tree_.__getstate__()["values"]
    assert np.array_equal(tensors["estimators_.0.tree_.values"].numpy(), tree_values)
    assert _readers.plan(path).layout.whole_file  # type: ignore[union-attr]


def test_fortran_ordered_and_big_endian_arrays_keep_their_values(tmp_path: Path) -> None:
    path = tmp_path / "arrays.pkl"
    fortran = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    big = np.arange(5, dtype=">i4")
    joblib.dump({"fortran": fortran, "big": big, "scalar": np.array(2.5), "empty": np.zeros((0, 3))}, path)
    tensors, _values = _readers.load(path)
    assert np.array_equal(tensors["fortran"].numpy(), fortran)
    assert tensors["big"].numpy().tobytes() == big.tobytes()  # its bytes as written
    assert tensors["scalar"].numpy() == 2.5 and tuple(tensors["empty"].shape) == (0, 3)


def test_two_dumps_of_the_same_model_are_bit_identical(tmp_path: Path) -> None:
    result = two_runs(tmp_path, lambda out, _run: joblib.dump(forest(), out / "model.joblib"))
    assert (result.verdict, result.grade) == (compare.IDENTICAL, compare.BIT_IDENTICAL)


def test_one_changed_coefficient_is_not_reproducible_and_named(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        model = logistic()
        model.coef_[0, 2] += run * 1e-6
        joblib.dump(model, out / "model.joblib")

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert "coef_" in result.sentence and "container bytes" not in result.sentence


def test_trailing_bytes_after_a_joblib_file_are_never_container_bytes(tmp_path: Path) -> None:
    body = io.BytesIO()
    joblib.dump(logistic(), body)

    def write(out: Path, run: int) -> None:
        (out / "model.joblib").write_bytes(body.getvalue() + f"SECOND PAYLOAD {run}".encode())

    assert_not_reproduced(two_runs(tmp_path, write), "model.joblib")


def _wrapper_shape_at(data: bytes, shape: bytes, replacement: bytes) -> bytes:
    assert data.count(shape) >= 1
    return data.replace(shape, replacement, 1)


def test_a_huge_declared_shape_is_refused_in_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "model.joblib"
    body = io.BytesIO()
    joblib.dump({"w": np.arange(3.0)}, body)
    # the shape (3,) is pickled as BININT1 3, TUPLE1; make it BININT 2**31-1
    hostile = _wrapper_shape_at(body.getvalue(), b"K\x03\x85", b"J\xff\xff\xff\x7f\x85")
    path.write_bytes(hostile)
    with pytest.raises(
        ValueError, match=r"^a joblib array of shape \[2147483647\] needs .* the file is truncated"
    ):
        read_pickle(path)
    content = _readers.plan(path)
    assert content.format == "file" and "past the end of the file" in (content.note or "")


def test_a_truncated_array_is_refused_in_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "model.joblib"
    body = io.BytesIO()
    joblib.dump({"w": np.arange(64.0)}, body)
    path.write_bytes(body.getvalue()[:-200])
    with pytest.raises(ValueError, match="past the end of the file"):
        read_pickle(path)


def test_an_object_array_is_its_own_nested_pickle_read_safely(tmp_path: Path) -> None:
    path = tmp_path / "labels.joblib"
    joblib.dump({"labels": np.array(["cat", 3, None], dtype=object), "after": np.ones(2)}, path)
    tensors, values = _readers.load(path)
    assert values["labels.data"] == ["cat", 3, None] and np.array_equal(tensors["after"].numpy(), np.ones(2))
    assert _readers.plan(path).layout.whole_file  # type: ignore[union-attr]


def test_a_wrapper_without_a_dtype_is_refused_in_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "model.pkl"
    path.write_bytes(b"\x80\x04cjoblib.numpy_pickle\nNumpyArrayWrapper\n)\x81}(\x8c\x05shape\x94K\x01\x85ub.")
    with pytest.raises(ValueError, match=r"^a joblib NumpyArrayWrapper has no NumPy dtype"):
        read_pickle(path)


def test_a_flood_of_cheap_opcodes_after_an_array_is_refused_by_the_memory_charge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each EMPTY_SET opcode is one byte that builds a 216-byte set: past 16 bytes a byte plus the floor
    monkeypatch.setattr(_pickle_joblib, "MEMORY_FLOOR", 1 << 20)
    body = io.BytesIO()
    joblib.dump([np.arange(3.0)], body)
    path = tmp_path / "model.joblib"
    path.write_bytes(body.getvalue()[:-1] + b"\x8f" * 100_000 + b".")
    with pytest.raises(OverLimit, match="far more objects than its bytes hold"):
        read_pickle(path)


def test_a_plain_pickle_that_names_the_wrapper_as_a_value_is_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "names.pkl"
    path.write_bytes(b"\x80\x04]cjoblib.numpy_pickle\nNumpyArrayWrapper\na\x8c\x04next\x94a.")
    assert read_pickle(path).obj == ["joblib.numpy_pickle.NumpyArrayWrapper", "next"]


def test_a_plain_pickle_the_c_unpicklers_checks_refuse_stays_refused(tmp_path: Path) -> None:
    path = tmp_path / "memo.pkl"
    path.write_bytes(b"\x80\x04K\x01r\xff\xff\xff\x00.")  # a memo index past the opcodes read so far
    with pytest.raises(ValueError, match="memo index is out of range"):
        read_pickle(path)
