"""UBJSON documents (XGBoost's ``.ubj``, a booster's raw bytes inside a skops file) read as values and
tensors, recognised by their bytes whatever their name, and hostile ones refused within the bounds in one
sentence.

Documents are written by the fuzz seeds' encoder, which follows the UBJSON specification (draft 12:
markers, big-endian numbers, ``$`` type and ``#`` count headers) as XGBoost writes it, or by hand; where
XGBoost is installed, its own ``.ubj`` is read and checked against the JSON model it writes of the same
booster.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from reprobox.errors import UsageError
from reprobox.guest.hashing import _bounds, _ubjson, format_of, hash_checkpoint, load_tensors, load_values
from tests.fuzz.seeds import ubjson as encode

MODEL = {
    "learner": {
        "attributes": {},
        "feature_names": [],
        "objective": {"name": "multi:softprob", "num_class": 3},
        "trees": [
            {
                "split_conditions": np.array([0.5, -1.25, 3.0], dtype=np.float32),
                "left_children": np.array([1, -1, -1], dtype=np.int32),
                "default_left": np.array([0, 1, 0], dtype=np.uint8),
                "id": 0,
            }
        ],
        "score": 0.9375,
        "verbose": False,
        "seed": None,
    },
    "version": [3, 2, 0],
}


def test_objects_are_values_and_typed_arrays_tensors(tmp_path: Path) -> None:
    path = tmp_path / "model.ubj"
    path.write_bytes(encode(MODEL))
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert (digest.format, digest.reader, digest.note) == ("ubjson", _ubjson.READER_NAME, None)
    assert digest.unaccounted is not None and digest.unaccounted.bytes == 0  # every byte parsed
    shapes = {t.name: (t.dtype, t.shape) for t in digest.tensors}
    assert shapes == {
        "learner.trees.0.split_conditions": ("float32", (3,)),
        "learner.trees.0.left_children": ("int32", (3,)),
        "learner.trees.0.default_left": ("uint8", (3,)),
    }
    tensors, values = load_tensors(path)
    assert tensors["learner.trees.0.split_conditions"].tolist() == [0.5, -1.25, 3.0]
    assert tensors["learner.trees.0.left_children"].tolist() == [1, -1, -1]
    assert values == {
        "learner.attributes": {},
        "learner.feature_names": [],
        "learner.objective.name": "multi:softprob",
        "learner.objective.num_class": 3,
        "learner.trees.0.id": 0,
        "learner.score": 0.9375,
        "learner.verbose": False,
        "learner.seed": None,
        "version": [3, 2, 0],
    }


def test_optimised_containers_and_every_scalar_type_are_read() -> None:
    """Counted objects, typed objects, typed string and constant arrays, each integer width, float32,
    chars, high-precision numbers and no-ops, as the specification writes them."""
    document = (
        b"{#i\x07"
        + b"i\x01a" + b"[#i\x03" + b"i\xff" + b"U\xff" + b"I\x01\x00"  # a counted array of markers
        + b"i\x01b" + b"{$l#i\x02" + b"i\x01x" + struct.pack(">i", -7) + b"i\x01y" + struct.pack(">i", 9)
        + b"i\x01c" + b"[$S#i\x02" + b"i\x02hi" + b"i\x00"  # typed strings
        + b"i\x01d" + b"[$T#i\x03"  # three trues, no bytes each
        + b"i\x01e" + b"[N" + b"C" + b"z" + b"H" + b"i\x0512345" + b"d" + struct.pack(">f", 0.25) + b"N]"
        + b"i\x01f" + b"[$C#i\x03abc"  # a typed char array: a string
        + b"i\x01g" + b"[$[#i\x02" + b"]" + b"#i\x01Z"  # arrays of arrays, each without its marker
    )  # fmt: skip
    parsed = _ubjson._Parser(document, declared=len(document)).document()
    assert parsed == {
        "a": [-1, 255, 256],
        "b": {"x": -7, "y": 9},
        "c": ["hi", ""],
        "d": [True, True, True],
        "e": ["z", "12345", 0.25],
        "f": "abc",
        "g": [[], [None]],
    }


def test_a_booster_inside_a_file_named_bin_is_known_by_its_bytes(tmp_path: Path) -> None:
    """skops stores a booster's raw bytes as ``<uuid4>.bin``: a torch suffix, UBJSON content."""
    (tmp_path / "e623ebaf-21e2-43e1-80a1-a7f32413227e.bin").write_bytes(encode(MODEL))
    (tmp_path / "model").write_bytes(encode(MODEL))
    assert format_of(tmp_path / "e623ebaf-21e2-43e1-80a1-a7f32413227e.bin") == "ubjson"
    assert format_of(tmp_path / "model") == "ubjson"
    for name, text in {"a": b"{}", "b": b'{"a": 1}', "c": b"[1, 2]", "d.log": b"[INFO] step 3"}.items():
        (tmp_path / name).write_bytes(text)
        assert format_of(tmp_path / name) != "ubjson", name
    (tmp_path / "notes.txt").write_bytes(b"{Loss: 0.5, epoch 3}")  # a length past the file: no UBJSON
    assert format_of(tmp_path / "notes.txt") == "file"


def test_xgboost_ubj_matches_its_json_model(tmp_path: Path) -> None:
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(0)
    data = xgb.DMatrix(rng.normal(size=(60, 4)), label=rng.integers(0, 2, size=60))
    booster = xgb.train({"max_depth": 2, "nthread": 1}, data, num_boost_round=3)
    booster.save_model(tmp_path / "model.ubj")
    booster.save_model(tmp_path / "model.json")
    model = json.loads((tmp_path / "model.json").read_text())
    tensors, values = load_tensors(tmp_path / "model.ubj")
    tree = "learner.gradient_booster.model.trees.1"
    expected = model["learner"]["gradient_booster"]["model"]["trees"][1]
    assert tensors[f"{tree}.split_conditions"].tolist() == pytest.approx(expected["split_conditions"])
    assert tensors[f"{tree}.left_children"].tolist() == expected["left_children"]
    assert values["learner.objective.name"] == model["learner"]["objective"]["name"]
    assert hash_checkpoint(tmp_path / "model.ubj", relative_to=tmp_path).note is None


@pytest.mark.parametrize(
    ("document", "sentence"),
    [
        (b"[" * 5000 + b"]" * 5000, "nests deeper than the limit of 200 levels"),
        (b"[$d#L" + struct.pack(">q", 1 << 60) + b"\x00" * 8, "declares 1152921504606846976 elements"),
        (b"[$Z#L" + struct.pack(">q", 1 << 40) + b"", "declares 1099511627776 elements, over the limit"),
        (b"[#L" + struct.pack(">q", 1 << 50) + b"Z", "declares 1125899906842624 elements"),
        (b"{i\x01aZi\x01aT}", "lists the key 'a' twice"),
        (b"[SL" + struct.pack(">q", 1 << 40) + b"abc]", "declares 1099511627776 bytes"),
        (b"[SU\x03abc]trailing", "holds 8 bytes after the document ends"),
        (b"[i\x01i\x02", "ends inside the document"),
        (b"[Si\xfeab]", "declares a negative length"),
        (b"[Q]", "which is no UBJSON type"),
        (b"[$x#i\x01\x00", "declares elements of type"),
    ],
)
def test_hostile_documents_are_refused_in_one_sentence(
    tmp_path: Path, document: bytes, sentence: str
) -> None:
    path = tmp_path / "model.ubj"
    path.write_bytes(document)
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.format == "file" and digest.note is not None and sentence in digest.note, digest.note
    assert "\n" not in digest.note
    with pytest.raises(UsageError, match=r"model\.ubj") as raised:
        load_values(path)
    assert sentence in str(raised.value) and "\n" not in str(raised.value)


def test_size_values_and_cpu_time_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.ubj"
    path.write_bytes(encode({"values": [float(i) for i in range(10_000)]}))
    monkeypatch.setattr(_ubjson, "MAX_UBJSON_BYTES", 4096)
    with pytest.raises(UsageError, match=r"refused: it holds .* over the limit of 4096 bytes"):
        hash_checkpoint(path, relative_to=tmp_path, strict=True)
    monkeypatch.undo()
    monkeypatch.setattr(_ubjson, "MAX_VALUES", 40)  # counted as they are read
    with pytest.raises(UsageError, match="refused: it holds more than the limit of 40 values"):
        hash_checkpoint(path, relative_to=tmp_path, strict=True)
    monkeypatch.undo()
    monkeypatch.setattr(_bounds, "FILE_CPU_SECONDS", 0.0)
    with pytest.raises(UsageError, match=r"refused: reading it takes over 0 s of CPU time, the limit \(4096"):
        hash_checkpoint(path, relative_to=tmp_path, strict=True)
