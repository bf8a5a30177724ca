"""Hand-aimed hostile inputs, one per failure class the readers once had; each is generated here (some
are large) and hashed like a fuzzer's input by ``tests/unit/test_fuzz_readers.py``."""

from __future__ import annotations

import io
import pickle
import struct
import zipfile
from collections.abc import Callable
from typing import Any

Probe = tuple[str, str, Callable[[], bytes]] | tuple[str, str, Callable[[], dict[str, bytes]]]
"""(target, suffix for the text target, the input's bytes, or a folder's files by name for a target of
``forkserver.FOLDERS``)."""


def _npy_bytes() -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.arange(4096, dtype=np.float32))
    return buffer.getvalue()


def _npz(compression: int, damage: Callable[[bytes], bytes] = lambda b: b, name: str = "w.npy") -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        entry = zipfile.ZipInfo("member")
        entry.filename = name  # zipfile refuses an empty name given by name
        entry.compress_type = compression
        with archive.open(entry, "w") as stream:
            stream.write(_npy_bytes())
    return damage(out.getvalue())


def _damage_stream(data: bytes) -> bytes:
    """Bytes in the middle of the first member's compressed stream flipped (its CRC stays stale)."""
    (name_len, extra_len) = struct.unpack_from("<HH", data, 26)
    start = 30 + name_len + extra_len
    middle = start + 40
    return data[:middle] + bytes(b ^ 0x5A for b in data[middle : middle + 24]) + data[middle + 24 :]


def _directory_before_start(data: bytes) -> bytes:
    """The central directory's member offsets moved before the file's first byte."""
    at = data.rfind(b"PK\x05\x06")
    (directory,) = struct.unpack_from("<I", data, at + 16)
    out = bytearray(data)
    position = directory
    while out[position : position + 4] == b"PK\x01\x02":
        struct.pack_into("<I", out, position + 42, 0)  # local header at 0 ...
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", out, position + 28)
        position += 46 + name_len + extra_len + comment_len
    struct.pack_into("<I", out, at + 16, directory + 1000)  # ... and the directory past where it is
    return bytes(out)


def _deep_yaml_int() -> bytes:
    return b"hex: 0x" + b"f" * 4000 + b"\nsexagesimal: 1" + b":59" * 3000 + b"\n"


def _long_pickle() -> bytes:
    return pickle.dumps({"big": 10**5000, "negative": -(7**9000)}, protocol=2)


def _empty_sets() -> bytes:
    """Six MiB of EMPTY_SET opcodes, each a new set on the stack: the unpickler's own walk."""
    return b"\x80\x04" + b"\x8f" * (6 << 20) + b"."


def _empty_lists_header() -> bytes:
    header = b"[" + b"[]," * (30 << 20) + b"[]]"
    return struct.pack("<Q", len(header)) + header


PROBES: dict[str, Probe] = {
    "npz-broken-deflate": ("npz", "", lambda: _npz(zipfile.ZIP_DEFLATED, _damage_stream)),
    "npz-broken-lzma": ("npz", "", lambda: _npz(zipfile.ZIP_LZMA, _damage_stream)),
    "npz-broken-bzip2": ("npz", "", lambda: _npz(zipfile.ZIP_BZIP2, _damage_stream)),
    "npz-empty-member-name": ("npz", "", lambda: _npz(zipfile.ZIP_STORED, name="")),
    "npz-directory-before-start": ("npz", "", lambda: _npz(zipfile.ZIP_STORED, _directory_before_start)),
    "torch-directory-before-start": (
        "torch",
        "",
        lambda: _directory_before_start(_npz(zipfile.ZIP_STORED, name="archive/data.pkl")),
    ),
    "yaml-integers-over-4300-digits": ("text", ".yaml", _deep_yaml_int),
    "pickle-integers-over-4300-digits": ("pickle", "", _long_pickle),
    "pickle-six-mib-of-empty-sets": ("pickle", "", _empty_sets),
    "safetensors-header-of-empty-lists": ("safetensors", "", _empty_lists_header),
}


def _tiny_wandb_records() -> bytes:
    """40 MiB of valid W&B chunks, each a record of one empty field: the reader's per-record cost."""
    from tests.fuzz.seeds import wandb_frame

    return wandb_frame([b"\x5a\x00"] * ((40 << 20) // 9))  # field 11 (telemetry), empty: one value each


PROBES["wandb-40-mib-of-tiny-records"] = ("wandb", "", _tiny_wandb_records)


PROBES["mlflow-a-million-metric-lines"] = ("mlflow", "", lambda: b"0 0 0\n" * 1_000_000)


def _sqlite_file(script: str, patch: Callable[[bytearray], None] = lambda data: None) -> bytes:
    import sqlite3
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "probe.db"
        db = sqlite3.connect(path)
        db.executescript(script)
        db.commit()
        db.close()
        data = bytearray(path.read_bytes())
    patch(data)
    return bytes(data)


def _trusted_page_count(data: bytearray) -> None:
    """2**31 pages declared, and trusted: the version-valid-for field equals the change counter."""
    struct.pack_into(">I", data, 28, 2**31)
    data[92:96] = data[24:28]


_RECURSIVE = """
CREATE TABLE t (a INTEGER PRIMARY KEY, b);
INSERT INTO t VALUES (1, 'x');
CREATE VIEW forever AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c;
CREATE TRIGGER again AFTER INSERT ON t BEGIN INSERT INTO t (b) VALUES (new.b); END;
"""
PROBES["sqlite-declares-2**31-pages"] = ("sqlite", "", lambda: _sqlite_file(_RECURSIVE, _trusted_page_count))
PROBES["sqlite-recursive-view-and-trigger"] = ("sqlite", "", lambda: _sqlite_file(_RECURSIVE))


def _gzip_of_zeros() -> bytes:
    import gzip

    return gzip.compress(bytes(16 << 20), compresslevel=9) * 5  # 80 MiB in five members, deflate's ratio


def _bzip2_bomb() -> bytes:
    import bz2

    return bz2.compress(bytes(32 << 20))  # about 45 bytes a MiB: far past any ratio


PROBES["compressed-80-mib-of-zeros-in-gzip-members"] = ("compressed", ".json.gz", _gzip_of_zeros)
PROBES["compressed-bzip2-bomb"] = ("compressed", ".npy.bz2", _bzip2_bomb)


def _tensorboard_record_of_tiny_fields() -> bytes:
    """One event record of 4 Mi two-byte fields (step = 0, again and again)."""
    from tests.fuzz.mutate import tfrecord

    return tfrecord(b"\x10\x00" * (4 << 20))


PROBES["tensorboard-one-record-of-4-mi-fields"] = ("tensorboard", "", _tensorboard_record_of_tiny_fields)


def _tensorboard_a_million_scalar_events() -> bytes:
    """10**6 events of one scalar each (step, wall time, tag `loss`, simple_value): within the size cap.
    Their checksums are computed side by side (``masked_crc32c_many``), a few at a time would take long."""
    import struct

    import numpy as np

    from reprobox.guest.hashing._crc32c import masked_crc32c_many
    from tests.wire import varint

    value = b"\x0a\x04loss\x15" + struct.pack("<f", 0.5)
    summary = b"\x0a" + varint(len(value)) + value
    summary_field = b"\x2a" + varint(len(summary)) + summary
    bodies = [b"\x09" + struct.pack("<d", 1.7e9 + step) + b"\x10" + varint(step) + summary_field
              for step in range(1_000_000)]  # fmt: skip
    lengths = np.array([len(body) for body in bodies], dtype=np.int64)
    blob = b"".join(bodies)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    headers = b"".join(struct.pack("<Q", n) for n in lengths.tolist())
    header_crcs = masked_crc32c_many(headers, np.arange(len(bodies), dtype=np.int64) * 8, 8)
    body_crcs = np.empty(len(bodies), dtype=np.uint32)
    for length in np.unique(lengths).tolist():
        chosen = lengths == length
        body_crcs[chosen] = masked_crc32c_many(blob, starts[chosen], length)
    return b"".join(
        struct.pack("<QI", len(body), int(header_crc)) + body + struct.pack("<I", int(body_crc))
        for body, header_crc, body_crc in zip(bodies, header_crcs.tolist(), body_crcs.tolist(), strict=True)
    )


PROBES["tensorboard-a-million-scalar-events"] = ("tensorboard", "", _tensorboard_a_million_scalar_events)


def _hdf5_file(write: Callable[[object], None], libver: str = "earliest") -> bytes:
    """A file h5py writes (``write`` given the open file)."""
    import tempfile
    from pathlib import Path

    import h5py

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "probe.h5"
        with h5py.File(path, "w", libver=libver) as f:
            write(f)
        return path.read_bytes()


def _hdf5_chunk_bomb() -> bytes:
    """A deflated chunk of 4 MiB of zeros whose layout says the chunk holds 16 bytes."""
    import numpy as np

    data = _hdf5_file(
        lambda f: f.create_dataset(
            "w", data=np.zeros(4 << 20, dtype=np.int8), chunks=(4 << 20,), compression="gzip"
        )
    )
    return data.replace(struct.pack("<II", 4 << 20, 1), struct.pack("<II", 16, 1))


def _hdf5_deep_groups() -> bytes:
    return _hdf5_file(lambda f: f.create_group("/".join(["g"] * 400)))


def _hdf5_terabyte_of_fill() -> bytes:
    """A chunked dataset of 2**40 floats never written: it would be its fill value throughout."""
    return _hdf5_file(lambda f: f.create_dataset("w", shape=(1 << 40,), chunks=(1 << 16,), dtype="f4"))


def _hdf5_many_chunks() -> bytes:
    """200,000 chunks of one byte each, every one listed in the chunk B-tree."""
    import numpy as np

    return _hdf5_file(lambda f: f.create_dataset("w", data=np.ones(200_000, dtype=np.int8), chunks=(1,)))


def _hdf5_many_links() -> bytes:
    """20,000 links in one group, in dense storage (a fractal heap and a version 2 B-tree)."""

    def write(f: object) -> None:
        group = f.create_group("g")  # type: ignore[attr-defined]
        for i in range(20_000):
            group[f"link{i}"] = h5py_hard_link_target(f)

    return _hdf5_file(write, "latest")


def h5py_hard_link_target(f: object) -> object:
    """One small dataset every link of ``_hdf5_many_links`` points at (each a hard link to it)."""
    if "target" not in f:  # type: ignore[operator]
        f["target"] = [1]  # type: ignore[index]
    return f["target"]  # type: ignore[index]


PROBES["hdf5-chunk-inflating-past-its-size"] = ("hdf5", "", _hdf5_chunk_bomb)
PROBES["hdf5-groups-400-deep"] = ("hdf5", "", _hdf5_deep_groups)
PROBES["hdf5-a-terabyte-of-fill-value"] = ("hdf5", "", _hdf5_terabyte_of_fill)
PROBES["hdf5-200-000-chunks"] = ("hdf5", "", _hdf5_many_chunks)
PROBES["hdf5-20-000-links-to-one-dataset"] = ("hdf5", "", _hdf5_many_links)


def _pt2_archive(config: dict[str, object], model: bytes = b"{}", weight: bytes = b"\x00" * 8) -> bytes:
    """A PT2 archive as zipfile writes one (torch's writer aligns its members; the reader needs none)."""
    import json

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("archive/archive_format", "pt2")
        archive.writestr("archive/models/model.json", model)
        archive.writestr("archive/data/weights/model_weights_config.json", json.dumps({"config": config}))
        archive.writestr("archive/data/weights/weight_0", weight)
    return out.getvalue()


def _pt2_weight(sizes: list[int], strides: list[int], path: str = "weight_0") -> dict[str, object]:
    def ints(values: list[int]) -> list[dict[str, int]]:
        return [{"as_int": v} for v in values]

    meta = {"dtype": 7, "sizes": ints(sizes), "strides": ints(strides), "storage_offset": {"as_int": 0}}
    meta |= {"layout": 7, "requires_grad": False, "device": {"type": "cpu", "index": None}}
    return {"fc.weight": {"path_name": path, "is_param": True, "use_pickle": False, "tensor_meta": meta}}


def _torchscript_missing_storage() -> bytes:
    """A TorchScript archive whose constants.pkl names a storage its constants/ folder lacks."""
    persistent = (  # a persistent id ("storage", torch.FloatStorage, "0", "cpu", 4), loaded
        b"\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\n"
        b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x04tQ."
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"training": True}, protocol=2))
        archive.writestr("archive/constants.pkl", persistent)
        archive.writestr("archive/code/__torch__.py", "class M(Module):\n  pass\n")
        archive.writestr("archive/version", "3\n")
    return out.getvalue()


PROBES["pt2-weight-expanded-to-a-terabyte"] = (
    "pt2",
    "",
    lambda: _pt2_archive(_pt2_weight([2**20, 2**20], [0, 0])),
)
PROBES["pt2-weight-named-outside-its-folder"] = (
    "pt2",
    "",
    lambda: _pt2_archive(_pt2_weight([2], [1], path="../../../etc/passwd")),
)
PROBES["pt2-program-nested-a-million-levels"] = (
    "pt2",
    "",
    lambda: _pt2_archive(_pt2_weight([2], [1]), model=b"[" * 1_000_000 + b"]" * 1_000_000),
)
PROBES["torchscript-constants-over-a-missing-storage"] = ("torchscript", "", _torchscript_missing_storage)


# --- torch Distributed Checkpoint: whole folders (a .metadata beside its shards), each file by name ------


def _dcp_folder(change: Callable[[Any], None]) -> dict[str, bytes]:
    """One process's DCP save, its index unpickled (written here: trusted), changed and pickled again."""
    import tempfile
    import warnings
    from pathlib import Path

    import torch
    import torch.distributed.checkpoint as dcp

    state = {"model": {"weight": torch.arange(24.0).reshape(6, 4), "bias": torch.ones(4)}, "step": 5}
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # it saves alone, without a process group
        dcp.save(state, checkpoint_id=folder)
        files = {path.name: path.read_bytes() for path in Path(folder).iterdir()}
    metadata = pickle.loads(files[".metadata"])  # the save just written here: trusted
    change(metadata)
    files[".metadata"] = pickle.dumps(metadata)
    return files


def _storage(metadata: Any, fqn: str) -> tuple[Any, Any]:
    """The storage key of ``fqn``'s first item and where it lies."""
    key = next(key for key in metadata.storage_data if key.fqn == fqn)
    return key, metadata.storage_data[key]


def _past_the_end(metadata: Any) -> None:
    _key, info = _storage(metadata, "model.weight")
    info.offset, info.length = info.offset + 10, 1 << 40


def _named_shard(name: str) -> Callable[[Any], None]:
    def change(metadata: Any) -> None:
        _storage(metadata, "model.weight")[1].relative_path = name

    return change


def _overlapping_chunks(metadata: Any) -> None:
    """model.weight declared [8, 4], cut in two chunks of [6, 4] at rows 0 and 2 (overlapping rows 2 to
    5), both read from the one item's bytes (overlapping in the shard too)."""
    import torch
    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, MetadataIndex

    entry = metadata.state_dict_metadata["model.weight"]
    entry.size = torch.Size([8, 4])
    entry.chunks.append(ChunkStorageMetadata(torch.Size([2, 0]), torch.Size([6, 4])))
    _key, info = _storage(metadata, "model.weight")
    metadata.storage_data[MetadataIndex("model.weight", [2, 0], 1)] = info


def _declared(size: list[int]) -> Callable[[Any], None]:
    """model.weight declared ``size``, its one chunk of [6, 4] at the start."""

    def change(metadata: Any) -> None:
        import torch

        metadata.state_dict_metadata["model.weight"].size = torch.Size(size)

    return change


def _cycle(metadata: Any) -> None:
    """A list that holds itself in the index's planner data, and a mapping that holds itself."""
    loop: list[Any] = [1]
    loop.append(loop)
    itself: dict[str, Any] = {}
    itself["again"] = itself
    metadata.planner_data = {"loop": loop, "mapping": itself}


def _one_tensor_of_every_item(metadata: Any) -> None:
    """One tensor of [100_000, 4] in 100,000 chunks of one row (the item limit), every one read from
    model.bias's bytes: a 9 MiB index whose reading meets the CPU budget, once for the whole folder."""
    import torch
    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, MetadataIndex

    entry = metadata.state_dict_metadata["model.bias"]
    _key, info = _storage(metadata, "model.bias")
    entry.size = torch.Size([100_000, 4])
    entry.chunks = [ChunkStorageMetadata(torch.Size([n, 0]), torch.Size([1, 4])) for n in range(100_000)]
    metadata.state_dict_metadata = {"rows": entry}
    metadata.storage_data = {MetadataIndex("rows", [n, 0], n): info for n in range(100_000)}


PROBES["dcp-item-past-its-shard-end"] = ("dcp-metadata", "", lambda: _dcp_folder(_past_the_end))
PROBES["dcp-overlapping-chunks"] = ("dcp-metadata", "", lambda: _dcp_folder(_overlapping_chunks))
PROBES["dcp-a-tensor-of-2**48-elements"] = (
    "dcp-metadata",
    "",
    lambda: _dcp_folder(_declared([1 << 24, 1 << 24])),
)
PROBES["dcp-a-1-gib-tensor-of-one-small-chunk"] = (
    "dcp-metadata",
    "",
    lambda: _dcp_folder(_declared([1 << 16, 1 << 12])),
)
PROBES["dcp-shard-in-the-parent-folder"] = (
    "dcp-metadata",
    "",
    lambda: _dcp_folder(_named_shard("../x.distcp")),
)
PROBES["dcp-shard-named-by-an-absolute-path"] = (
    "dcp-metadata",
    "",
    lambda: _dcp_folder(_named_shard("/tmp/x.distcp")),
)
PROBES["dcp-index-holding-itself"] = ("dcp-metadata", "", lambda: _dcp_folder(_cycle))
PROBES["dcp-100-000-chunks-of-one-tensor"] = (
    "dcp-metadata",
    "",
    lambda: _dcp_folder(_one_tensor_of_every_item),
)


def _zstd_rle_blocks() -> bytes:
    """A frame of 200,000 RLE blocks of 128 KiB each (25 GiB) from 800 kB, no content size declared."""
    return b"\x28\xb5\x2f\xfd\x00\x78" + b"\x02\x00\x10\x00" * 200_000 + b"\x03\x00\x10\x00"


def _zstd_sequence_blocks() -> bytes:
    """Compressed blocks of 43,690 three-byte matches each, read from no bits (RLE tables): the most
    sequences a block holds, repeated until the output or the CPU budget is spent."""
    block = b"\x00" + b"\xff\xaa\x2b" + b"\x54\x00\x00\x00" + b"\x01"
    header = (len(block) << 3 | 2 << 1).to_bytes(3, "little")
    return b"\x28\xb5\x2f\xfd\x00\x78" + b"\x20\x00\x00abcd" + (header + block) * 20_000


PROBES["zstd-25-gib-of-rle-blocks"] = ("zstd", "", _zstd_rle_blocks)
PROBES["zstd-blocks-of-the-most-sequences"] = ("zstd", "", _zstd_sequence_blocks)
