"""Damaged, hostile and unsupported HDF5 files: refused in one sentence naming the object, never a hang,
a crash or a traceback. Files are written by h5py and then cut, flipped or patched where the format puts
the field each test aims at."""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from reprobox.errors import UsageError
from reprobox.guest.hashing import hash_checkpoint, load_tensors, load_values
from reprobox.guest.hashing._bounds import MAX_NESTING

h5py = pytest.importorskip("h5py")


def _small(path: Path, libver: str = "earliest") -> bytes:
    with h5py.File(path, "w", libver=libver) as f:
        f["layers/dense/vars/0"] = np.arange(12, dtype=np.float32).reshape(3, 4)
        f.create_dataset(
            "chunked", data=np.arange(64, dtype=np.int32), chunks=(16,), compression="gzip", shuffle=True
        )
        f.attrs["name"] = "model"
        f.attrs["sizes"] = np.arange(3)
    return path.read_bytes()


def _outcome(path: Path) -> str:
    """read, noted (compared as bytes with a sentence) or refused (UsageError); anything else raises."""
    try:
        digest = hash_checkpoint(path, relative_to=path.parent, strict=True)
    except UsageError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return "refused"
    if digest.format == "file":
        assert digest.note is not None and "\n" not in digest.note and "HDF5" in digest.note
        return "noted"
    try:
        load_tensors(path)
        load_values(path)
    except UsageError as exc:
        assert "\n" not in str(exc)
    return "read"


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_a_file_cut_anywhere_is_refused_in_one_sentence(tmp_path: Path, libver: str) -> None:
    whole = _small(tmp_path / "whole.h5", libver)
    outcomes = set()
    for cut in sorted({*range(8, len(whole), max(1, len(whole) // 97)), len(whole) - 1}):
        path = tmp_path / f"cut{cut}.h5"
        path.write_bytes(whole[:cut])
        outcomes.add(_outcome(path))
        digest = hash_checkpoint(path, relative_to=tmp_path)  # the signature is there: it says why not
        assert digest.format == "file" and digest.content_sha256 == digest.file_sha256
        with pytest.raises(UsageError, match=r"HDF5|cannot be read safely"):
            load_tensors(path)
    assert "read" not in outcomes


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_flipped_and_overwritten_bytes_are_read_or_refused(tmp_path: Path, libver: str) -> None:
    whole = _small(tmp_path / "whole.h5", libver)
    rng = random.Random(7)
    outcomes: dict[str, int] = {}
    for number in range(150):
        data = bytearray(whole)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data))
            if rng.random() < 0.5:
                data[at] ^= 1 << rng.randrange(8)
            else:
                value = rng.choice([0, 1, 0xFF, 0x7FFFFFFF, 2**63 - 1, 2**64 - 1])
                width = rng.choice([1, 2, 4, 8])
                data[at : at + width] = (value % (1 << 8 * width)).to_bytes(width, "little")
        path = tmp_path / f"flip{number}.h5"
        path.write_bytes(bytes(data))
        kind = _outcome(path)
        outcomes[kind] = outcomes.get(kind, 0) + 1
    assert outcomes.get("read", 0) and len(outcomes) > 1, outcomes


def test_a_hard_link_cycle_is_read_once_and_named(tmp_path: Path) -> None:
    path = tmp_path / "cycle.h5"
    with h5py.File(path, "w") as f:
        group = f.create_group("a")
        group["w"] = np.ones(2)
        group["loop"] = group  # a/loop is a/ again: a walk that follows it never ends
        f["alias"] = group["w"]
        f["soft"] = h5py.SoftLink("/a/w")
    tensors, values = load_tensors(path)
    assert list(tensors) == ["a/w"]
    assert values == {"a/loop": "hard link to /a", "alias": "hard link to /a/w", "soft": "soft link to /a/w"}


def test_groups_nested_past_the_limit_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.h5"
    with h5py.File(path, "w") as f:
        f.create_group("/".join(["g"] * (MAX_NESTING + 1)))
    with pytest.raises(UsageError, match=f"nest deeper than the limit of {MAX_NESTING} levels"):
        hash_checkpoint(path, relative_to=tmp_path, strict=True)


def _refusal(path: Path) -> str:
    digest = hash_checkpoint(path, relative_to=path.parent)
    assert digest.format == "file" and digest.note is not None and "\n" not in digest.note
    with pytest.raises(UsageError):
        load_tensors(path)
    return digest.note


def test_features_it_does_not_read_are_refused_naming_the_object(tmp_path: Path) -> None:
    cases = {
        "lzf": lambda f: f.create_dataset("w", data=np.arange(100.0), compression="lzf"),
        "fletcher": lambda f: f.create_dataset("w", data=np.arange(100.0), chunks=(10,), fletcher32=True),
        "compound": lambda f: f.create_dataset("w", data=np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")])),
        "external": lambda f: f.__setitem__("w", h5py.ExternalLink("other.h5", "/x")),
        "extendable": lambda f: f.create_dataset("w", data=np.arange(4), maxshape=(None,), chunks=(2,)),
    }
    expected = {
        "lzf": "dataset 'w' is stored through the lzf filter, which is not read",
        "fletcher": "dataset 'w' is stored through the fletcher32 filter, which is not read",
        "compound": "dataset 'w' has a compound datatype, which is not read",
        "external": "'w' in group '/' is a link to an external file, which is not followed",
        "extendable": "dataset 'w' indexes its chunks with a extensible array, which is not read",
    }
    for name, write in cases.items():
        libver = "latest" if name == "extendable" else "earliest"
        path = tmp_path / f"{name}.h5"
        with h5py.File(path, "w", libver=libver) as f:
            write(f)
        assert expected[name] in _refusal(path), name


def test_a_chunk_that_inflates_past_its_size_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("w", data=np.zeros(4096, dtype=np.int8), chunks=(4096,), compression="gzip")
    data = path.read_bytes()
    layout = struct.pack("<II", 4096, 1)  # the chunk's dimensions (elements, then the element's bytes)
    assert data.count(layout) == 1
    path.write_bytes(data.replace(layout, struct.pack("<II", 16, 1)))  # a chunk of 16 bytes now
    with pytest.raises(UsageError, match="decompresses to more than the 16 bytes it holds"):
        hash_checkpoint(path, relative_to=tmp_path, strict=True)
    assert zlib.decompress(zlib.compress(bytes(4096))) == bytes(4096)


def test_chunks_and_attribute_elements_are_counted_for_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reprobox.guest.hashing import _hdf5_tree

    path = tmp_path / "counted.h5"
    with h5py.File(path, "w") as f:
        for name in ("a", "b"):
            f.create_dataset(name, data=np.arange(60, dtype=np.int8), chunks=(10,))  # 6 chunks each
            f[name].attrs["sizes"] = np.arange(6)
    assert hash_checkpoint(path, relative_to=tmp_path, strict=True).note is None
    monkeypatch.setattr(_hdf5_tree, "MAX_CHUNKS", 11)
    with pytest.raises(UsageError, match="lists more chunks than its shape holds, or the file's limit"):
        hash_checkpoint(path, relative_to=tmp_path, strict=True)
    monkeypatch.setattr(_hdf5_tree, "MAX_CHUNKS", 12)
    monkeypatch.setattr(_hdf5_tree, "MAX_VALUE_ELEMENTS", 11)
    with pytest.raises(UsageError, match="attributes hold more than the limit of 11 elements"):
        hash_checkpoint(path, relative_to=tmp_path, strict=True)


def test_a_stored_chunk_far_larger_than_its_elements_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "wide.h5"
    with h5py.File(path, "w") as f:
        noise = np.random.default_rng(0).integers(0, 256, 8192, dtype=np.uint8)  # deflate cannot shrink it
        f.create_dataset("w", data=noise, chunks=(8192,), compression="gzip")
    data = path.read_bytes()
    layout = struct.pack("<II", 8192, 1)
    path.write_bytes(data.replace(layout, struct.pack("<II", 2, 1)))  # a chunk of 2 bytes, stored in 8 KiB
    note = _refusal(path)
    assert "dataset 'w' stores a chunk of" in note and "bytes for 2" in note
