"""The safe pickle reader on real files written by torch.save and pickle: values, tensors, hostile input."""

from __future__ import annotations

import argparse
import builtins
import dataclasses
import enum
import os
import pickle
import random
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from reprobox.guest.hashing import format_of, hash_checkpoint, load_tensors
from reprobox.guest.hashing._canonical import flatten
from reprobox.guest.hashing._pickle import read_pickle
from reprobox.guest.hashing._pickle_arrays import to_torch
from reprobox.guest.hashing._torch_types import SavedTensor


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.norm = torch.nn.BatchNorm1d(2)


@dataclasses.dataclass
class TrainingArguments:
    output_dir: str
    learning_rate: float
    seed: int = 42


class Scheduler(enum.Enum):
    LINEAR = "linear"
    COSINE = "cosine"


class AttributeDict(dict):  # type: ignore[type-arg]  # Lightning's hyper-parameter container
    pass


class Payload:
    """Unpickles to a call of ``func(arg)``: live only if the reader runs what the file names."""

    def __init__(self, func: object, arg: str) -> None:
        self.func, self.arg = func, arg

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (self.func, (self.arg,))


def read(path: Path) -> tuple[dict[str, object], dict[str, object]]:
    arrays, values = flatten(read_pickle(path).obj)
    return {k: to_torch(v) if isinstance(v, SavedTensor) else v for k, v in arrays}, dict(values)


def test_a_full_model_pickle_yields_the_model_state_by_module_path(tmp_path: Path) -> None:
    model = Net()
    torch.save(model, tmp_path / "model.pt")

    arrays, values = read(tmp_path / "model.pt")

    state = model.state_dict()
    names = {
        "fc.weight": "_modules.fc._parameters.weight",
        "fc.bias": "_modules.fc._parameters.bias",
        "norm.running_mean": "_modules.norm._buffers.running_mean",
        "norm.num_batches_tracked": "_modules.norm._buffers.num_batches_tracked",
    }
    for key, name in names.items():
        assert torch.equal(arrays[name], state[key]), key  # type: ignore[arg-type]
    assert values["__class__"].endswith("test_pickle_reader.Net")  # type: ignore[attr-defined]
    assert values["_modules.fc.__class__"] == "torch.nn.modules.linear.Linear"
    assert values["_modules.fc.in_features"] == 3


def test_a_pth_tar_with_a_namespace_is_found_by_content_and_names_its_values(tmp_path: Path) -> None:
    model = Net()
    checkpoint = {
        "args": argparse.Namespace(output="/x/y", lr=0.1),
        "state_dict": model.state_dict(),
        "metric": 0.912,
    }
    torch.save(checkpoint, tmp_path / "checkpoint-0.pth.tar")

    assert format_of(tmp_path / "checkpoint-0.pth.tar") == "torch"
    tensors, values = load_tensors(tmp_path / "checkpoint-0.pth.tar")
    assert values["args.output"] == "/x/y" and values["args.lr"] == 0.1 and values["metric"] == 0.912
    assert values["args.__class__"] == "argparse.Namespace"
    assert torch.equal(tensors["state_dict.fc.weight"], model.fc.weight.detach())


def test_rng_state_files_keep_every_generator(tmp_path: Path) -> None:
    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.get_rng_state()}
    torch.save(state, tmp_path / "rng_state.pth")

    arrays, values = read(tmp_path / "rng_state.pth")

    numpy_state: Any = np.random.get_state()
    assert np.array_equal(arrays["numpy.1"], numpy_state[1])  # type: ignore[arg-type]
    assert arrays["numpy.1"].dtype == np.uint32  # type: ignore[attr-defined]
    assert values["numpy.0"] == "MT19937" and values["numpy.2"] == numpy_state[2]
    assert values["python.1"] == random.getstate()[1]
    assert torch.equal(arrays["cpu"], torch.get_rng_state())  # type: ignore[arg-type]


def test_dataclasses_enums_and_dict_subclasses_become_named_values(tmp_path: Path) -> None:
    args = TrainingArguments(output_dir="/runs/a/out", learning_rate=5e-5)
    saved = {"args": args, "schedule": Scheduler.COSINE, "hparams": AttributeDict(lr=0.01, layers=[2, 2])}
    torch.save(saved, tmp_path / "training_args.bin")
    for protocol in (0, 2, 4, 5):
        with (tmp_path / f"p{protocol}.pkl").open("wb") as f:
            pickle.dump(saved, f, protocol=protocol)

    for name in ("training_args.bin", "p0.pkl", "p2.pkl", "p4.pkl", "p5.pkl"):
        _, values = read(tmp_path / name)
        assert values["args.output_dir"] == "/runs/a/out", name
        assert values["args.learning_rate"] == 5e-5 and values["args.seed"] == 42, name
        assert values["hparams.lr"] == 0.01 and values["hparams.layers"] == [2, 2], name
        schedule = values.get("schedule.__args__", values.get("schedule.__attribute__"))
        assert schedule in (["cosine"], "COSINE"), name


def test_numpy_values_and_legacy_torch_files(tmp_path: Path) -> None:
    array = np.arange(12, dtype=">f4").reshape(3, 4)
    saved = {"a": array, "f": np.asfortranarray(array), "s": np.int64(7), "o": np.array([{}])}
    for protocol in (2, 5):  # protocol 5 spells arrays as _frombuffer(buffer, dtype, shape, order)
        with (tmp_path / f"arrays{protocol}.pickle").open("wb") as f:
            pickle.dump(saved, f, protocol=protocol)
    weights = torch.arange(12.0).reshape(3, 4)
    torch.save(
        {"w": weights.t(), "row": weights[1]}, tmp_path / "old.pt", _use_new_zipfile_serialization=False
    )

    for protocol in (2, 5):
        arrays, values = read(tmp_path / f"arrays{protocol}.pickle")
        assert np.array_equal(arrays["a"], array) and np.array_equal(arrays["f"], array)  # type: ignore[arg-type]
        assert values["s"] == 7 and values["o.__class__"] == "numpy.ndarray"
    arrays, _ = read(tmp_path / "old.pt")
    assert torch.equal(arrays["w"], weights.t()) and torch.equal(arrays["row"], weights[1])  # type: ignore[arg-type]


def test_pickles_that_would_run_code_run_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "payload-ran"
    command = f"touch {marker}"
    code = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    with (tmp_path / "system.pkl").open("wb") as f:
        pickle.dump({"x": Payload(os.system, command)}, f)
    torch.save({"w": torch.ones(2), "x": Payload(builtins.eval, code)}, tmp_path / "eval.pt")
    (tmp_path / "raw.pkl").write_bytes(b"cos\nsystem\n(S'" + command.encode() + b"'\ntR.")  # protocol 0

    system = hash_checkpoint(tmp_path / "system.pkl", relative_to=tmp_path)
    evaluated = hash_checkpoint(tmp_path / "eval.pt", relative_to=tmp_path)
    _, system_values = load_tensors(tmp_path / "system.pkl")
    _, eval_values = load_tensors(tmp_path / "eval.pt")
    _, raw_values = read(tmp_path / "raw.pkl")

    assert not marker.exists()
    assert system.format == "pickle" and system.reader == "safe pickle reader"
    assert system_values["x.__class__"] == f"{os.system.__module__}.system"
    assert system_values["x.__args__"] == [command]
    assert eval_values["x.__class__"] == "builtins.eval" and eval_values["x.__args__"] == [code]
    assert [t.name for t in evaluated.tensors] == ["w"]
    assert raw_values == {"__class__": "os.system", "__args__": [command]}
    torch.load(tmp_path / "eval.pt", weights_only=False)  # control: the payload is live when unpickled
    assert marker.exists()


def test_extension_codes_and_persistent_ids_in_plain_pickles_are_refused(tmp_path: Path) -> None:
    (tmp_path / "ext.pkl").write_bytes(b"\x80\x02\x82\x07.")  # EXT1 7: nothing registered
    (tmp_path / "pid.pkl").write_bytes(b"\x80\x02K\x01Q.")  # BINPERSID
    for name in ("ext.pkl", "pid.pkl"):
        with pytest.raises(ValueError):
            read_pickle(tmp_path / name)


def test_truncated_garbage_and_bomb_files_raise_quickly(tmp_path: Path) -> None:
    torch.save({"w": torch.arange(1000.0), "args": argparse.Namespace(a=1)}, tmp_path / "good.pt")
    good = (tmp_path / "good.pt").read_bytes()
    pickled = pickle.dumps({"a": list(range(100)), "b": b"x" * 1000}, protocol=4)
    laughs: list[object] = []
    for _ in range(60):
        laughs = [laughs, laughs]  # 2**60 lists once shared references are expanded
    files = {
        "cut-zip.pt": good[: len(good) // 2],
        "cut-pickle.pkl": pickled[: len(pickled) - 400],
        "garbage.pkl": b"\x80\x04" + bytes(range(256)) * 4,
        "huge-count.pkl": b"\x80\x04\x8e" + (2**62).to_bytes(8, "little") + b"abc.",  # BINBYTES8
        "memo.pkl": b"\x80\x02r\xff\xff\xff\x7fN.",  # LONG_BINPUT far beyond the opcodes
        "deep.pkl": b"\x80\x02" + b"]" * 5000 + b"a" * 4999 + b".",
        "laughs.pkl": pickle.dumps(laughs),
        "empty.pkl": b"",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        started = time.monotonic()
        with pytest.raises(ValueError):
            read_pickle(tmp_path / name)
        assert time.monotonic() - started < 5, name
        result = hash_checkpoint(tmp_path / name, relative_to=tmp_path)
        assert result.format == "file" and result.note is not None and "content not hashed" in result.note
        assert result.reader == "file bytes"
    with zipfile.ZipFile(tmp_path / "good.pt") as src, zipfile.ZipFile(tmp_path / "short.pt", "w") as dst:
        for info in src.infolist():  # the same archive with its first storage cut short
            dst.writestr(info, src.read(info)[:10] if info.filename.endswith("/data/0") else src.read(info))
    with pytest.raises(ValueError, match="fewer than"):
        read_pickle(tmp_path / "short.pt")
    torch.save(torch.zeros(1).expand(2**31), tmp_path / "strided.pt")  # 8 GiB of views of 4 bytes
    with pytest.raises(ValueError, match="span"):
        read_pickle(tmp_path / "strided.pt")


def test_hashes_record_the_reader_and_follow_the_content(tmp_path: Path) -> None:
    weights = {"fc.weight": torch.arange(6.0).reshape(2, 3), "fc.bias": torch.ones(2, dtype=torch.bfloat16)}
    for run, output in (("a", "/runs/a"), ("b", "/runs/a"), ("c", "/runs/c")):
        torch.save(
            {"args": argparse.Namespace(output=output), "state_dict": weights}, tmp_path / f"{run}.pth.tar"
        )
    torch.save({"state_dict": weights}, tmp_path / "plain.pt")

    a, b, c = (hash_checkpoint(tmp_path / f"{run}.pth.tar", relative_to=tmp_path) for run in "abc")
    plain = hash_checkpoint(tmp_path / "plain.pt", relative_to=tmp_path)

    assert a.format == "torch" and a.reader == "safe pickle reader"
    assert a.note is not None and "argparse.Namespace" in a.note and "safe pickle reader" in a.note
    assert a.to_json()["reader"] == "safe pickle reader"
    assert plain.reader == "safe pickle reader" and plain.note is None
    assert a.content_sha256 == b.content_sha256 == c.content_sha256 == plain.content_sha256  # both readers
    assert a.metadata_sha256 == b.metadata_sha256 != c.metadata_sha256
    assert set(a.metadata) == {"args.__class__", "args.output"}
