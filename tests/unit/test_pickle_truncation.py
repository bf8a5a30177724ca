"""Torch and pickle files changed while their tensors are hashed: a sentence naming the file, never SIGBUS.

Each check that could kill a process runs in a subprocess, so a reader that read a tensor through a
memory map of a file cut short would show as a death by SIGBUS, not as a crashed test run.
"""

from __future__ import annotations

import collections
import hashlib
import io
import os
import pickle
import signal
import struct
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pytest
import torch
from hashing_process import cut_short_while_hashed

from reprobox.guest.hashing import hash_checkpoint
from reprobox.guest.hashing._canonical import flatten
from reprobox.guest.hashing._pickle import read_pickle
from reprobox.guest.hashing._torch_types import SavedTensor

ROOT = Path(__file__).parents[2]
LARGE = 6 << 30  # a sparse storage: no disk used, and hashing its zeros takes many seconds
ZIP_LARGE = 4_000_000_000  # as large as a zip archive holds without zip64 records

_PLAN_CHANGE_HASH = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from reprobox.guest.hashing._filebytes import FileChanged
    from reprobox.guest.hashing._readers import plan

    path, how = Path(sys.argv[1]), sys.argv[2]
    content = plan(path)
    assert content.arrays, content.note
    if how == "cut":
        os.truncate(path, 4096)
    elif how == "rewritten":
        data = path.read_bytes()
        path.write_bytes(data[::-1])
    else:
        path.with_name("other").write_bytes(path.read_bytes())
        os.replace(path.with_name("other"), path)
    try:
        for array in content.arrays:
            for _ in array.buffers(1 << 20):
                pass
    except FileChanged as exc:
        print(f"changed: {exc.filename}: {exc.strerror}")
        sys.exit(0)
    print("hashed the file as it was")
    sys.exit(1)
    """
)


def _plan_change_hash(path: Path, how: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _PLAN_CHANGE_HASH, str(path), how],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _weights() -> dict[str, object]:
    weight = torch.arange(400_000, dtype=torch.float32).reshape(800, 500)  # over one pread chunk
    return {"weight": weight, "transposed": weight.t(), "row": weight[7]}


def _torch_zip(path: Path) -> Path:
    torch.save(_weights(), path)
    return path


def _torch_legacy(path: Path) -> Path:
    torch.save(_weights(), path, _use_new_zipfile_serialization=False)
    return path


def _numpy_pickle(path: Path) -> Path:
    path.write_bytes(pickle.dumps({"weight": np.arange(400_000, dtype=np.float32).reshape(800, 500)}))
    return path


@pytest.mark.parametrize("make", [_torch_zip, _torch_legacy, _numpy_pickle], ids=["zip", "legacy", "pickle"])
def test_a_file_cut_short_between_reading_and_hashing_raises_file_changed(
    make: object, tmp_path: Path
) -> None:
    assert callable(make)
    path = make(tmp_path / "model.bin")
    result = _plan_change_hash(path, "cut")
    assert result.returncode != -signal.SIGBUS, "the process died of SIGBUS"
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"changed: {path}: it changed while it was hashed" in result.stdout


@pytest.mark.parametrize("how", ["rewritten", "replaced"])
def test_a_torch_file_rewritten_or_replaced_before_hashing_raises_file_changed(
    how: str, tmp_path: Path
) -> None:
    path = _torch_zip(tmp_path / "model.pt")
    result = _plan_change_hash(path, how)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "changed while it was hashed" in result.stdout


class _Storage:
    """Stands for a storage of LARGE bytes that the file holds as a sparse hole."""


class _Tensor:
    """Pickles as torch pickles a flat tensor of ``numel`` elements over ``_Storage``."""

    def __init__(self, numel: int) -> None:
        self.numel = numel

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        rebuild = torch._utils._rebuild_tensor_v2
        return (rebuild, (_Storage(), 0, (self.numel,), (1,), False, collections.OrderedDict()))


def _pickled_tensor(f: BinaryIO, numel: int, persistent_id: tuple[object, ...]) -> None:
    """``{"w": a uint8 tensor of numel elements}`` pickled as torch pickles it, its storage by this id."""

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj: object) -> object:
            return persistent_id if isinstance(obj, _Storage) else None

    Pickler(f, protocol=2).dump({"w": _Tensor(numel)})


def _sparse_legacy_torch(path: Path) -> Path:
    """A legacy torch.save file of one uint8 tensor of LARGE elements, its storage a sparse hole."""
    with path.open("wb") as f:
        for header in (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}):
            pickle.dump(header, f, protocol=2)
        _pickled_tensor(f, LARGE, ("storage", torch.ByteStorage, "0", "cpu", LARGE, None))
        pickle.dump(["0"], f, protocol=2)
        f.write(LARGE.to_bytes(8, "little"))
        f.truncate(f.tell() + LARGE)
    return path


def _sparse_zip_torch(path: Path) -> Path:
    """A torch.save zip archive of one uint8 tensor of ZIP_LARGE elements: its storage member, stored as
    torch stores it, is a sparse hole (its CRC is not checked: storages are read in place)."""
    data = io.BytesIO()
    _pickled_tensor(data, ZIP_LARGE, ("storage", torch.ByteStorage, "0", "cpu", ZIP_LARGE))
    members: list[tuple[str, bytes | int]] = [
        ("big/data.pkl", data.getvalue()),
        ("big/byteorder", b"little"),
        ("big/data/0", ZIP_LARGE),
        ("big/version", b"3\n"),
    ]
    directory = b""
    with path.open("wb") as f:
        for name, content in members:
            offset, encoded = f.tell(), name.encode()
            size = content if isinstance(content, int) else len(content)
            crc = 0 if isinstance(content, int) else zlib.crc32(content)
            sizes = (crc, size, size, len(encoded))
            f.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, *sizes, 0) + encoded)
            if isinstance(content, int):
                f.seek(size, os.SEEK_CUR)
            else:
                f.write(content)
            directory += struct.pack(
                "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, *sizes, 0, 0, 0, 0, 0, offset
            )
            directory += encoded
        start = f.tell()
        f.write(directory)
        f.write(
            struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(directory), start, 0)
        )
    return path


@pytest.mark.parametrize(
    ("make", "elements"),
    [(_sparse_legacy_torch, LARGE), (_sparse_zip_torch, ZIP_LARGE)],
    ids=["legacy", "zip"],
)
def test_reprobox_hash_of_a_torch_file_cut_short_while_hashed_is_a_sentence(
    make: Callable[[Path], Path], elements: int, tmp_path: Path
) -> None:
    path = make(tmp_path / "big.pt")
    ((name, tensor),) = flatten(read_pickle(path).obj)[0]
    assert name == "w" and isinstance(tensor, SavedTensor) and tensor.shape == (elements,) and tensor.stream
    cut_short_while_hashed(path)


def _row_major_sha256(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.contiguous().view(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_strided_and_expanded_tensors_hash_as_their_row_major_bytes(legacy: bool, tmp_path: Path) -> None:
    base = torch.arange(600_000, dtype=torch.float32).reshape(1000, 600)
    tensors = {
        "contiguous": base,
        "transposed": base.t(),
        "every_other": base[::2, 1::3],
        "offset_row": base[999],
        "expanded": torch.arange(5.0).unsqueeze(1).expand(5, 70_000),
        "scalar_expanded": torch.tensor(2.5, dtype=torch.bfloat16).expand(3, 4),
        "bool_transposed": (base > 1000).t()[:7],
    }
    path = tmp_path / "views.pt"
    torch.save(tensors, path, _use_new_zipfile_serialization=not legacy)

    digest = hash_checkpoint(path, relative_to=tmp_path)
    saved = dict(flatten(read_pickle(path).obj)[0])

    assert {t.name: t.sha256 for t in digest.tensors} == {k: _row_major_sha256(v) for k, v in tensors.items()}
    streamed = {name for name, value in saved.items() if isinstance(value, SavedTensor) and value.stream}
    assert streamed == {"contiguous", "offset_row"}  # the rest are read whole, when hashed
