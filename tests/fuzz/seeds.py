"""Seed files for each fuzz target, written by the libraries that write them in the field.

Run as ``python -m tests.fuzz.seeds FOLDER`` (a subprocess, so that torch, tensorboard and wandb are
imported there and not in the process that forks one child per input).
"""

from __future__ import annotations

import csv
import datetime
import functools
import io
import json
import pickle
import struct
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

from tests.fuzz import ocdbt_inputs as ocdbt_seeds


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
    stamp = datetime.datetime(2026, 11, 29, 5, 20, 3, 390000, tzinfo=datetime.timezone.utc)
    plain["book_time"], plain["day"] = stamp, stamp.date()  # Hyperopt's Trials keep their stamps so
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


_UBJSON_TYPED = {"|i1": b"i", "|u1": b"U", ">i2": b"I", ">i4": b"l", ">i8": b"L", ">f4": b"d", ">f8": b"D"}


def ubjson(value: object) -> bytes:
    """UBJSON (draft 12) of a value, as XGBoost writes it: lengths as int64, objects and untyped arrays
    marked and closed, NumPy arrays as typed and counted ones (``[$d#L...``)."""
    import numpy as np

    def length(n: int) -> bytes:
        return b"L" + struct.pack(">q", n)

    if value is None or isinstance(value, bool):
        return {None: b"Z", True: b"T", False: b"F"}[value]
    if isinstance(value, int):
        return b"L" + struct.pack(">q", value)
    if isinstance(value, float):
        return b"D" + struct.pack(">d", value)
    if isinstance(value, str):
        return b"S" + length(len(value.encode())) + value.encode()
    if isinstance(value, np.ndarray):
        big = value.astype(value.dtype.newbyteorder(">"))
        return b"[$" + _UBJSON_TYPED[big.dtype.str] + b"#" + length(big.size) + big.tobytes()
    if isinstance(value, list):
        return b"[" + b"".join(ubjson(v) for v in value) + b"]"
    assert isinstance(value, dict)
    return b"{" + b"".join(length(len(k.encode())) + k.encode() + ubjson(v) for k, v in value.items()) + b"}"


def _ubjson() -> list[bytes]:
    """XGBoost's own ``.ubj`` of a small booster where XGBoost is installed, and documents of each UBJSON
    type written by the specification (typed arrays of every numeric type, counted and typed objects)."""
    import numpy as np

    tree = {
        "split_conditions": np.array([0.5, -1.25, 3.0], dtype=np.float32),
        "left_children": np.array([1, -1, -1], dtype=np.int32),
        "default_left": np.array([0, 1, 0], dtype=np.uint8),
        "base_weights": np.array([0.25, -0.5, 1.0]),
        "ids": np.arange(4, dtype=np.int64),
        "small": np.array([-3, 4], dtype=np.int8),
        "mid": np.array([300, -300], dtype=np.int16),
        "name": "tree",
        "tree_param": {"num_nodes": "3", "size_leaf_vector": "1"},
    }
    out = [
        ubjson({"learner": {"trees": [tree, tree], "attributes": {}, "names": []}, "version": [3, 2, 0]}),
        b"{#i\x03i\x01a[$l#i\x02\x00\x00\x00\x01\xff\xff\xff\xffi\x01b{$d#i\x01i\x01x?\x80\x00\x00"
        + b"i\x01c[$S#i\x02i\x02hii\x00",
        b"[CzHi\x0512345TFZN[$T#i\x03]",
    ]
    try:
        import xgboost as xgb
    except ImportError:
        return out
    rng = np.random.default_rng(0)
    data = xgb.DMatrix(rng.normal(size=(40, 3)), label=rng.integers(0, 3, size=40))
    booster = xgb.train(
        {"max_depth": 2, "nthread": 1, "objective": "multi:softprob", "num_class": 3}, data, 2
    )
    return [*out, bytes(booster.save_raw(raw_format="ubj"))]


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


def zstd_frames(data: bytes, level: int = 3, *, checksum: bool = True, streamed: bool = False) -> bytes:
    """A Zstandard frame of ``data`` as the reference library writes it (``streamed``: no content size,
    a block cut at every 4 KiB written)."""
    import zstandard

    compressor = zstandard.ZstdCompressor(level=level, write_checksum=checksum)
    if not streamed:
        return bytes(compressor.compress(data))
    stream = compressor.compressobj()
    pieces = [stream.compress(data[at : at + 4096]) for at in range(0, len(data), 4096)]
    return b"".join([*pieces, stream.flush()])


def _zstd() -> list[bytes]:
    """Frames the reference library writes of a JSON manifest, float32 weights, zeros, a repeated pattern
    and a long run of sequences, at fast, default and slow levels; streamed frames of many blocks; frames
    one after another with a skippable one between. Where zstandard is missing: raw and RLE blocks by hand."""
    import numpy as np

    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    hand = [
        b"\x28\xb5\x2f\xfd\x20\x05\x29\x00\x00hello",  # single segment, size 5, one raw block
        b"\x28\xb5\x2f\xfd\x00\x48\x03\x01\x00z" + skippable,  # an RLE block of 32 bytes, no size
    ]
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return hand
    manifest = json.dumps(
        {"version": 1, "config": {"max_inline_value_bytes": 100}, "nodes": list(range(300))}
    )
    weights = np.random.default_rng(0).standard_normal(8192).astype(np.float32).tobytes()
    tokens = [bytes([i, 255 - i, i ^ 90, 7]) for i in range(200)]
    sequences = b"".join(tokens[(i * 7919) % 200] for i in range(6000))
    return [
        *hand,
        zstd_frames(manifest.encode(), 3),
        zstd_frames(weights, 3),
        zstd_frames(weights[:4000], 19, checksum=False),
        zstd_frames(bytes(20000) + b"abc" * 3000, -5),
        zstd_frames(sequences, 1),
        zstd_frames(sequences + weights[:5000], 9, streamed=True),
        zstd_frames(b"x", 3) + skippable + zstd_frames(manifest.encode()[:500], 19),
        zstd_frames(b"", 3),
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


Builder = (
    Callable[[], list[bytes]] | Callable[[], list[tuple[str, bytes]]] | Callable[[], list[dict[str, bytes]]]
)
"""A target's seeds: files, files with the suffix their name keeps, or folders (each file by name)."""

BUILDERS: dict[str, Builder] = {
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
    "ubjson": _ubjson,
    "zstd": _zstd,
    "pt2": _pt2,
    "torchscript": _torchscript,
}


# --- torch Distributed Checkpoint: folders of one save each (``forkserver.FOLDERS``) ---------------------


@functools.cache
def _dcp_saves() -> list[dict[str, bytes]]:
    """Whole DCP checkpoints, each file by name: one process's save (tensors of several dtypes and
    dimensions, nested state dicts, a 0-d tensor, bytes, a BytesIO, plain values), one of a single tensor,
    and two ranks' (tensors cut by rows, by columns and unevenly, one replicated, values that rank 0 alone
    writes)."""
    import tempfile
    import warnings

    import torch
    import torch.distributed.checkpoint as dcp

    state = {
        "model": {
            "fc": {"weight": torch.arange(6.0).reshape(2, 3), "bias": torch.zeros(2, dtype=torch.bfloat16)},
            "embed": torch.arange(8, dtype=torch.int64).reshape(4, 2),
            "empty": torch.zeros(0, 3),
        },
        "optim": {
            "state": {"0": {"step": torch.tensor(3.0), "exp_avg": torch.ones(2, 3)}},
            "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": ["model.fc.weight"]}],
        },
        "epoch": 3,
        "name": "run",
        "blob": b"\x00\x01raw",
        "buffer": io.BytesIO(b"a BytesIO entry"),
    }
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # it saves alone, without a process group
        dcp.save(state, checkpoint_id=Path(folder) / "one")
        dcp.save({"w": torch.ones(3)}, checkpoint_id=Path(folder) / "small")
        saves = [_files(Path(folder) / "one"), _files(Path(folder) / "small")]
        _two_ranks(Path(folder))
        saves.append(_files(Path(folder) / "two"))
    return saves


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def _two_ranks(folder: Path) -> None:
    """Two gloo ranks, forked from here, each saving its own shards of ShardedTensors (their chunks lie in
    the index as a DTensor's do; DTensor's first use imports torch's compiler, seconds on each rank)."""
    import importlib

    import torch.multiprocessing as mp

    for name in ("torch.distributed.checkpoint", "torch.distributed._shard.sharded_tensor"):
        importlib.import_module(name)  # once here, before the ranks fork, not in each

    mp.start_processes(
        _save_rank,
        args=(f"file://{folder / 'rendezvous'}", str(folder / "two")),
        nprocs=2,
        start_method="fork",
    )


def _save_rank(rank: int, init: str, checkpoint: str) -> None:
    import warnings

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed._shard.sharded_tensor import Shard, ShardMetadata, init_from_local_shards

    warnings.simplefilter("ignore")  # ShardedTensor's deprecation
    dist.init_process_group("gloo", init_method=init, world_size=2, rank=rank)

    def sharded(whole: torch.Tensor, cut: int, at: int) -> object:
        """``whole`` cut along dimension ``cut`` at ``at``: rank 0 holds what lies before, rank 1 the rest."""
        start, end = [(0, at), (at, whole.shape[cut])][rank]
        piece = whole.narrow(cut, start, end - start).contiguous()
        offsets = [start if dim == cut else 0 for dim in range(whole.dim())]
        meta = ShardMetadata(offsets, list(piece.shape), f"rank:{rank}/cpu")
        return init_from_local_shards([Shard(piece, meta)], list(whole.shape))

    weight = torch.arange(24.0).reshape(6, 4)
    state = {
        "model": {
            "weight": sharded(weight, 0, 3),
            "proj": sharded(weight.T.contiguous(), 1, 4),
            "bias": sharded(torch.arange(5, dtype=torch.float16), 0, 4),
            "scale": torch.full((2,), 0.5),  # on both ranks: one writes it
        },
        "step": 5,
        "tag": "run",
    }
    dcp.save(state, checkpoint_id=checkpoint)
    dist.destroy_process_group()


BUILDERS["dcp-metadata"] = _dcp_saves
BUILDERS["dcp-shard"] = _dcp_saves
BUILDERS.update(ocdbt_seeds.BUILDERS)


def write_seeds(folder: Path, names: list[str]) -> None:
    for name in names:
        target = folder / name
        target.mkdir(parents=True, exist_ok=True)
        for index, seed in enumerate(BUILDERS[name]()):
            if isinstance(seed, dict):  # a folder: the target's file and its companions, by name
                (target / f"seed{index}").mkdir(exist_ok=True)
                for file_name, content in seed.items():
                    (target / f"seed{index}" / file_name).parent.mkdir(parents=True, exist_ok=True)
                    (target / f"seed{index}" / file_name).write_bytes(content)
                continue
            suffix, data = seed if isinstance(seed, tuple) else ("", seed)
            (target / f"seed{index}{suffix}").write_bytes(data)


if __name__ == "__main__":
    write_seeds(Path(sys.argv[1]), sys.argv[2:] or list(BUILDERS))
