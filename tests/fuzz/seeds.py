"""Seed files for each fuzz target, written by the libraries that write them in the field.

Run as ``python -m tests.fuzz.seeds FOLDER`` (a subprocess, so that torch, tensorboard and wandb are
imported there and not in the process that forks one child per input).
"""

from __future__ import annotations

import csv
import io
import json
import pickle
import struct
import sys
import zlib
from collections.abc import Callable
from pathlib import Path


def _npy() -> list[bytes]:
    import numpy as np

    arrays = [
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.array(7, dtype=np.int64),
        np.arange(4, dtype=">f8"),
        np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)),
        np.zeros((0, 3), dtype=np.bool_),
        np.zeros(3, dtype=[("a", "<i4"), ("b", "<f2")]),
        np.arange(5, dtype=np.complex64),
    ]
    out = []
    for array in arrays:
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        out.append(buffer.getvalue())
    return out


def _npz() -> list[bytes]:
    import numpy as np

    out = []
    for save in (np.savez, np.savez_compressed):
        buffer = io.BytesIO()
        save(
            buffer, w=np.arange(12, dtype=np.float32).reshape(3, 4), b=np.ones(3, dtype=">i4"), e=np.zeros(0)
        )
        out.append(buffer.getvalue())
    return out


def _safetensors() -> list[bytes]:
    import numpy as np
    from safetensors.numpy import save

    return [
        save({"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(2, dtype=np.int64)}),
        save({"x": np.zeros((1, 2, 2), dtype=np.float16)}, metadata={"format": "pt", "step": "3"}),
        save({}),
    ]


def _torch() -> list[bytes]:
    import torch

    state = {
        "model": {
            "fc.weight": torch.arange(6.0).reshape(2, 3),
            "fc.bias": torch.zeros(2, dtype=torch.bfloat16),
        },
        "expanded": torch.zeros(1).expand(8),
        "view": torch.arange(10)[2:8:2],
        "sparse": torch.eye(3).to_sparse(),
        "epoch": 3,
        "betas": (0.9, 0.999),
        "name": "run",
    }
    out = []
    for zipped in (True, False):
        buffer = io.BytesIO()
        torch.save(state, buffer, _use_new_zipfile_serialization=zipped)
        out.append(buffer.getvalue())
    quantized = torch.quantize_per_tensor(torch.arange(4.0), 0.5, 1, torch.quint8)
    buffer = io.BytesIO()
    torch.save({"q": quantized}, buffer)
    out.append(buffer.getvalue())
    return out


def _pickle() -> list[bytes]:
    import numpy as np

    value = {"weights": np.arange(6, dtype=np.float64).reshape(2, 3), "step": 10, "tags": {"a", "b"}}
    plain = {"lr": 0.1, "history": [1, 2.5, None, True, "x", b"\x00"], "pair": (1, 2), "big": 2**70}
    return (
        [pickle.dumps(value, protocol=p) for p in (2, 4, 5)]
        + [pickle.dumps(plain, protocol=p) for p in (0, 3)]
        + _joblib()
        + _dcp_index()
    )


def _dcp_index() -> list[bytes]:
    """torch.distributed.checkpoint's ``.metadata``: DCP's classes, chunks, storage keys that are objects."""
    import tempfile
    import warnings

    import torch
    import torch.distributed.checkpoint as dcp

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # it saves alone, without a process group
        dcp.save({"model": {"weight": torch.ones(2, 3)}, "step": 4}, checkpoint_id=folder)
        return [(Path(folder) / ".metadata").read_bytes()]


def _joblib() -> list[bytes]:
    """joblib.dump's files: arrays as raw bytes after their wrappers, aligned, Fortran-ordered, of objects
    (none where the sklearn extra, which brings joblib, is not installed)."""
    import numpy as np

    try:
        import joblib
    except ImportError:
        return []

    out = []
    for value in (
        {"coef_": np.arange(6, dtype=np.float64).reshape(2, 3), "n_iter_": np.array([7], dtype=np.int32)},
        {"f": np.asfortranarray(np.ones((2, 3), np.float32)), "labels": np.array(["a", 1], dtype=object)},
    ):
        buffer = io.BytesIO()
        joblib.dump(value, buffer)
        out.append(buffer.getvalue())
    return out


def _text() -> list[tuple[str, bytes]]:
    import yaml

    document = {"loss": [0.5, 0.25], "lr": 1e-3, "name": "run", "nested": {"a": [1, {"b": None}]}, "ok": True}
    rows = io.StringIO()
    writer = csv.writer(rows)
    writer.writerow(["step", "loss", "acc"])
    writer.writerows([[1, 0.5, 0.1], [2, 0.25, ""]])
    return [
        (".json", json.dumps(document).encode()),
        (".jsonl", "\n".join(json.dumps({"step": i, "loss": 1 / (i + 1)}) for i in range(4)).encode()),
        (".yaml", yaml.safe_dump(document).encode()),
        (".csv", rows.getvalue().encode()),
        (".tsv", b"iter\tPassed\tRemaining\n0\t3.1\t310\n1\t6.2\t305\n"),  # CatBoost's time_left.tsv
    ]


def _tensorboard() -> list[bytes]:
    import tempfile

    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    with tempfile.TemporaryDirectory() as folder:
        writer = EventFileWriter(folder)
        for step in range(3):
            value = summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
            writer.add_event(
                event_pb2.Event(wall_time=1.5 + step, step=step, summary=summary_pb2.Summary(value=[value]))
            )
        writer.add_event(event_pb2.Event(wall_time=9.0, step=3, file_version="brain.Event:2"))
        writer.close()
        (path,) = Path(folder).glob("events.out.tfevents.*")
        return [path.read_bytes()]


WANDB_HEADER = b":W&B" + struct.pack("<H", 0xBEE1) + b"\x00"
WANDB_BLOCK = 32 * 1024


def wandb_frame(records: list[bytes]) -> bytes:
    """Records in W&B's log framing (its leveldb-style writer): chunks within 32 KiB blocks."""
    out = bytearray(WANDB_HEADER)
    for record in records:
        rest, first = record, True
        while True:
            left = WANDB_BLOCK - len(out) % WANDB_BLOCK
            if left < 7:
                out += bytes(left)
                left = WANDB_BLOCK
            piece, rest = rest[: left - 7], rest[left - 7 :]
            kind = (1 if first else 4) if not rest else (2 if first else 3)
            out += struct.pack("<IHB", zlib.crc32(bytes((kind,)) + piece), len(piece), kind) + piece
            first = False
            if not rest:
                break
    return bytes(out)


def _wandb() -> list[bytes]:
    from wandb.proto import wandb_internal_pb2 as pb

    records = []
    for step in range(3):
        history = pb.HistoryRecord(
            item=[
                pb.HistoryItem(key="loss", value_json=json.dumps(1 / (step + 1))),
                pb.HistoryItem(key="_step", value_json=str(step)),
            ],
            step=pb.HistoryStep(num=step),
        )
        records.append(pb.Record(history=history, num=step).SerializeToString())
    config = pb.ConfigRecord(update=[pb.ConfigItem(key="lr", value_json="0.1")])
    summary = pb.SummaryRecord(update=[pb.SummaryItem(key="loss", value_json="0.3")])
    run = pb.RunRecord(run_id="abcdefgh", project="p", host="h")
    records += [pb.Record(config=config).SerializeToString(), pb.Record(summary=summary).SerializeToString()]
    records.append(pb.Record(run=run).SerializeToString())
    records.append(pb.Record(exit=pb.RunExitRecord(exit_code=0, runtime=5)).SerializeToString())
    big = pb.HistoryRecord(item=[pb.HistoryItem(key="big", value_json="0" * 40000)])  # over one block
    return [wandb_frame(records), wandb_frame([records[0], pb.Record(history=big).SerializeToString()])]


def _mlflow() -> list[bytes]:
    # MLflow's file store (mlflow/store/tracking/file_store.py) writes "<timestamp> <value> <step>" lines
    return [b"1700000000000 0.5 0\n1700000000100 0.25 1\n", b"1700000000000 -inf 0\n", b"1700000000000 3\n"]


def _hdf5() -> list[bytes]:
    """h5py's two layouts (``libver='earliest'``, its default and Keras's, and ``'latest'``), with chunks,
    filters, fill values, attributes of each type, dense links and a link cycle."""
    import tempfile

    import h5py
    import numpy as np

    out = []
    with tempfile.TemporaryDirectory() as folder:
        for number, libver in enumerate(("earliest", "latest", "latest")):
            path = Path(folder) / f"seed{number}.h5"
            with h5py.File(path, "w", libver=libver) as f:
                f["layers/dense/vars/0"] = np.arange(12, dtype=np.float32).reshape(3, 4)
                f["layers/dense/vars/1"] = np.zeros(3, dtype=">f8")
                chunked = np.arange(60, dtype=np.int16)
                f.create_dataset("chunked", data=chunked, chunks=(8,), compression="gzip", shuffle=True)
                sparse = f.create_dataset("sparse", shape=(6, 6), dtype=np.int32, chunks=(3, 3), fillvalue=7)
                sparse[0:3, 0:3] = 1
                f["flags"] = np.array([True, False])
                f.attrs["name"] = "model"
                f.attrs["fixed"] = np.bytes_(b"abc")
                f.attrs["sizes"] = np.arange(3, dtype=np.float16)
                f.attrs["words"] = ["relu", "softmax"]
                f["layers"]["up"] = f["layers"]  # a cycle
                if number == 2:  # past 8 links and 8 attributes: dense storage
                    for i in range(12):
                        f[f"many/d{i}"] = np.array([i])
                        f["many"].attrs[f"a{i}"] = i
            out.append(path.read_bytes())
    return out


def _sqlite() -> list[bytes]:
    """Small databases (512-byte pages, so that a mutation lands in a b-tree page as often as in the
    header) as SQLite writes them: Optuna's tables and keys, a WITHOUT ROWID table, AUTOINCREMENT, BLOBs,
    an index, a view and a trigger, one file in WAL mode."""
    import sqlite3
    import tempfile

    scripts = [
        """
        CREATE TABLE studies (study_id INTEGER NOT NULL, study_name VARCHAR(512), PRIMARY KEY (study_id));
        CREATE TABLE trial_params (param_id INTEGER NOT NULL, trial_id INTEGER, param_name VARCHAR(512),
            param_value FLOAT, distribution_json TEXT, PRIMARY KEY (param_id));
        CREATE INDEX ix_params ON trial_params (trial_id, param_name);
        CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY);
        INSERT INTO studies VALUES (1, 'study');
        INSERT INTO alembic_version VALUES ('v3.2.0.a');
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40)
        INSERT INTO trial_params SELECT i, i, 'lr', i * 0.001, '{"name": "FloatDistribution"}' FROM n;
        """,
        """
        CREATE TABLE experiments (experiment_id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE);
        CREATE TABLE metrics ("key" TEXT, value FLOAT, step INTEGER, PRIMARY KEY ("key", step)) WITHOUT ROWID;
        CREATE TABLE blobs (data BLOB, note TEXT, doubled AS (length(note) * 2) VIRTUAL);
        CREATE VIEW everything AS SELECT * FROM metrics JOIN experiments;
        CREATE TRIGGER stamp AFTER INSERT ON blobs BEGIN UPDATE blobs SET note = 'x'; END;
        INSERT INTO experiments (name) VALUES ('Default'), ('second');
        WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 30)
        INSERT INTO metrics SELECT 'loss', 1.0 / (i + 1), i FROM n;
        INSERT INTO blobs VALUES (randomblob(700), 'overflows a page'), (x'00ff', NULL);
        """,
    ]
    out = []
    with tempfile.TemporaryDirectory() as folder:
        for index, script in enumerate([*scripts, scripts[0]]):
            path = Path(folder) / f"seed{index}.db"
            db = sqlite3.connect(path)
            db.execute("PRAGMA page_size = 512")
            if index == len(scripts):
                db.execute("PRAGMA journal_mode = WAL")
            db.executescript(script)
            db.commit()
            db.close()
            out.append(path.read_bytes())
    return out


def _compressed() -> list[tuple[str, bytes]]:
    import bz2
    import gzip
    import lzma

    import numpy as np

    document = json.dumps({"loss": [0.5, 0.25], "lr": 1e-3, "name": "run"}).encode()
    array = io.BytesIO()
    np.save(array, np.arange(6, dtype=np.float32).reshape(2, 3))
    return [
        (".json.gz", gzip.compress(document, mtime=1795836268)),
        (".npy.gz", gzip.compress(array.getvalue(), mtime=0)),
        (".json.bz2", bz2.compress(document)),
        (".npy.xz", lzma.compress(array.getvalue())),
    ]


def _exported() -> dict[str, bytes]:
    """torch's exported and compiled forms of one small module (``tests.exported_models``), saved once."""
    import tempfile

    from tests.exported_models import save_all

    if not _EXPORTED:
        with tempfile.TemporaryDirectory() as folder:
            _EXPORTED.update(save_all(Path(folder)))
    return _EXPORTED


_EXPORTED: dict[str, bytes] = {}


def _pt2() -> list[bytes]:
    """torch.export.save's archive; package_pt2's of two models, an extra file, an ExecuTorch program."""
    return [_exported()["exported.pt2"], _exported()["packaged.pt2"]]


def _torchscript() -> list[bytes]:
    """torch.jit.save of a scripted and of a traced module (constants, traced inputs, extra files)."""
    return [_exported()["scripted.pt"], _exported()["traced.pt"]]


BUILDERS: dict[str, Callable[[], list[bytes]] | Callable[[], list[tuple[str, bytes]]]] = {
    "npy": _npy,
    "npz": _npz,
    "safetensors": _safetensors,
    "torch": _torch,
    "pickle": _pickle,
    "text": _text,
    "tensorboard": _tensorboard,
    "wandb": _wandb,
    "mlflow": _mlflow,
    "hdf5": _hdf5,
    "sqlite": _sqlite,
    "compressed": _compressed,
    "pt2": _pt2,
    "torchscript": _torchscript,
}


def write_seeds(folder: Path, names: list[str]) -> None:
    for name in names:
        target = folder / name
        target.mkdir(parents=True, exist_ok=True)
        for index, seed in enumerate(BUILDERS[name]()):
            suffix, data = seed if isinstance(seed, tuple) else ("", seed)
            (target / f"seed{index}{suffix}").write_bytes(data)


if __name__ == "__main__":
    write_seeds(Path(sys.argv[1]), sys.argv[2:] or list(BUILDERS))
