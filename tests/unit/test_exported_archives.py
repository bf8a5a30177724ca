"""TorchScript archives and torch.export PT2 archives are read by what they hold, every byte accounted for.

The archives are written by torch itself (``tests/exported_models``: ``torch.jit.save`` of a scripted and
a traced module, ``torch.export.save``, ``package_pt2`` with a second model, an extra file and an
ExecuTorch payload), hashed by the guest's real hashing and compared as runs are.
"""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import torch

from reprobox import compare
from reprobox.guest.hashing import _readers, hash_checkpoint
from reprobox.guest.hashing._torch_archive import SERIALIZATION_ID
from tests.exported_models import Tiny, bump, savers
from tests.unit.test_byte_accounting import assert_not_reproduced
from tests.unit.test_verdicts import two_runs

ROOT = Path(__file__).parents[2]
FORMS = ("scripted.pt", "traced.pt", "exported.pt2", "packaged.pt2")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[bytes]]:
    """Each form saved three times by one module: twice as it is, then once with one weight changed;
    every ``os.urandom`` draw the saves make is recorded under ``"draws"``."""
    folder = tmp_path_factory.mktemp("saved")
    model = Tiny()
    forms = savers(model)
    draws: list[bytes] = []
    real = os.urandom

    def recording(n: int) -> bytes:
        data = real(n)
        draws.append(data)
        return data

    out: dict[str, list[bytes]] = {name: [] for name in forms}
    with mock.patch.object(os, "urandom", recording):
        for step in range(3):
            if step == 2:
                bump(model)
            for name, save in forms.items():
                (folder / str(step)).mkdir(exist_ok=True)
                save(folder / str(step) / name)
                out[name].append((folder / str(step) / name).read_bytes())
    out["draws"] = draws
    return out


def writing(saved: dict[str, list[bytes]], name: str, steps: tuple[int, int]) -> Callable[[Path, int], None]:
    def write(out: Path, run: int) -> None:
        (out / name).write_bytes(saved[name][steps[run]])

    return write


@pytest.mark.parametrize("name", FORMS)
def test_every_byte_of_what_torch_writes_is_read(tmp_path: Path, saved: dict[str, Any], name: str) -> None:
    path = tmp_path / name
    path.write_bytes(saved[name][0])
    record = hash_checkpoint(path, relative_to=tmp_path)
    assert record.format == ("pt2" if name.endswith(".pt2") else "torchscript")
    assert record.unaccounted is not None
    if name == "packaged.pt2":  # ExecuTorch's program is no format reprobox reads: its bytes alone
        assert record.unaccounted.bytes == len(b"\x00ExecuTorch program\x01")
        assert record.note is not None and "'data/executorch/model.pte'" in record.note
    else:
        assert record.unaccounted.bytes == 0, record.note
    assert SERIALIZATION_ID in record.metadata


def test_tensors_are_named_and_valued_as_torch_loads_them(tmp_path: Path, saved: dict[str, Any]) -> None:
    for name in FORMS:
        (tmp_path / name).write_bytes(saved[name][0])
    with mock.patch("warnings.warn"):  # torch.jit.load is deprecated
        jit = {name: torch.jit.load(str(tmp_path / name)) for name in ("scripted.pt", "traced.pt")}
    for name, module in jit.items():
        tensors, values = _readers.load_tensors(tmp_path / name)
        for key, tensor in module.state_dict().items():
            assert torch.equal(tensors[key], tensor), (name, key)
        assert values["__class__"].endswith("Tiny") and values["fc.training"] is True
        assert any(key.startswith("code/") and "def forward" in str(v) for key, v in values.items())
        assert values["extra/notes.txt"] == "tiny"
    traced, _ = _readers.load_tensors(tmp_path / "traced.pt")
    assert torch.equal(traced["constants.pkl/c0"], torch.ones(2))  # CONSTANTS.c0 in its code
    assert traced["traced_inputs.pkl/__args__.0.forward.__args__.0.0"].shape == (1, 3)  # saved without data

    program = torch.export.load(str(tmp_path / "exported.pt2"))
    tensors, values = _readers.load_tensors(tmp_path / "exported.pt2")
    expected = {**program.state_dict, **program.constants}
    assert set(tensors) == {*expected, "data/sample_inputs/model.pt/0.0"}
    assert all(torch.equal(tensors[key], tensor) for key, tensor in expected.items())
    assert values["archive_format"] == "pt2"
    assert values["models/model.json/graph_module.graph.nodes.0.target"] == "torch.ops.aten.linear.default"

    packaged, values = _readers.load_tensors(tmp_path / "packaged.pt2")
    assert {"fc.weight", "second/fc.weight", "c", "second/c"} <= set(packaged)
    assert values["extra/notes.txt"] == "tiny"


def test_the_same_module_saved_twice_is_bit_identical_and_draws_nothing(
    tmp_path: Path, saved: dict[str, Any]
) -> None:
    # torch's writer derives .data/serialization_id from the record names and CRC32s: no save drew entropy
    assert saved["draws"] == []
    for name in FORMS:
        assert saved[name][0] == saved[name][1], name
        result = two_runs(tmp_path / name, writing(saved, name, (0, 1)))
        assert result.grade == compare.BIT_IDENTICAL, result.sentence
        with zipfile.ZipFile(io.BytesIO(saved[name][0])) as archive:
            written = next(n for n in archive.namelist() if n.endswith(SERIALIZATION_ID))
            whole = archive.read(written).decode()
        # its CRC half is checked against the directory: the value is its record-name half alone
        (tmp_path / name / name).write_bytes(saved[name][0])
        assert _readers.load_values(tmp_path / name / name)[SERIALIZATION_ID] == whole[:20]


@pytest.mark.slow  # two processes of their own import torch and save every form
def test_two_processes_save_the_same_bytes(tmp_path: Path) -> None:
    # one module's serialization id is one in every process: no run's record need excuse it. The hash
    # seed is fixed, as reprobox fixes it for every run: a scripted module's code lists its Final
    # constants in set order.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    command = [sys.executable, "-m", "tests.exported_models"]
    runs = [subprocess.Popen([*command, str(tmp_path / str(n))], env=env, cwd=ROOT) for n in (0, 1)]
    assert [run.wait(timeout=300) for run in runs] == [0, 0]
    for name in FORMS:
        assert (tmp_path / "0" / name).read_bytes() == (tmp_path / "1" / name).read_bytes(), name


@pytest.mark.parametrize("name", FORMS)
def test_a_changed_weight_is_named_by_its_name(tmp_path: Path, saved: dict[str, Any], name: str) -> None:
    result = two_runs(tmp_path, writing(saved, name, (0, 2)))
    assert result.grade == compare.NOT_REPRODUCIBLE, result.sentence
    names = {d["name"] for d in result.differences}
    expected = {"fc.weight", "second/fc.weight"} if name == "packaged.pt2" else {"fc.weight"}
    assert names == expected
    assert all(d["checkpoint"] == name and d["differing"] == 1 for d in result.differences)
    # the serialization id's CRC half follows the weight and is checked: no second difference
    assert [v["name"] for v in result.value_differences] == []


@pytest.mark.parametrize("name", FORMS)
def test_a_payload_appended_after_the_archive_is_never_container_bytes(
    tmp_path: Path, saved: dict[str, Any], name: str
) -> None:
    def write(out: Path, run: int) -> None:
        (out / name).write_bytes(saved[name][0] + f"SECOND PAYLOAD {run}".encode())

    assert_not_reproduced(two_runs(tmp_path, write), name)


def _with_member(data: bytes, member: str, replace: Callable[[bytes], bytes]) -> bytes:
    """The archive with one stored member's bytes replaced in place, its CRC32 with them (in the local
    header, the data descriptor and the directory): same length, so the rest stays as torch wrote it."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(member))
        old = archive.read(info)
    new = replace(old)
    assert len(new) == len(old) and info.compress_type == zipfile.ZIP_STORED
    start = data.index(old, info.header_offset)
    out = bytearray(data[:start] + new + data[start + len(old) :])
    crc, fresh = struct.pack("<I", info.CRC), struct.pack("<I", zlib.crc32(new))
    places = [info.header_offset + 14, start + len(old) + 4]  # the local header, a descriptor after the data
    (entry,) = struct.unpack_from("<I", out, out.rindex(b"PK\x05\x06") + 16)  # the directory's first entry
    while out[entry : entry + 4] == b"PK\x01\x02":
        name, extra, comment = struct.unpack_from("<HHH", out, entry + 28)
        if out[entry + 46 : entry + 46 + name] == info.filename.encode():
            places.append(entry + 16)
        entry += 46 + name + extra + comment
    for at in places:
        if out[at : at + 4] == crc:
            out[at : at + 4] = fresh
    return bytes(out)


def _rewritten(data: bytes, member: str, replace: Callable[[bytes], bytes]) -> bytes:
    """The archive written again by zipfile, member by member in its order, one member's bytes replaced
    (a compressed one too)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            content = source.read(info)
            target.writestr(info, replace(content) if info.filename.endswith(member) else content)
    return out.getvalue()


@pytest.mark.parametrize("name", ["traced.pt", "exported.pt2"])
def test_a_serialization_id_torch_did_not_derive_is_a_value_difference(
    tmp_path: Path, saved: dict[str, Any], name: str
) -> None:
    def write(out: Path, run: int) -> None:
        data = saved[name][0]
        if run:  # the CRC half no longer the records': the whole id is the value (the CRC field says so too)
            data = _with_member(data, SERIALIZATION_ID, lambda old: old[:20] + b"0" * 20)
        (out / name).write_bytes(data)

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE, result.sentence
    assert [v["name"] for v in result.value_differences] == [SERIALIZATION_ID]


def test_differing_code_is_named_by_its_member(tmp_path: Path, saved: dict[str, Any]) -> None:
    with zipfile.ZipFile(io.BytesIO(saved["traced.pt"][0])) as archive:  # its name: mangled once traced
        code = next(n for n in archive.namelist() if "/linear" in n and n.endswith(".py")).split("/", 1)[1]

    def write(out: Path, run: int) -> None:  # both archives written again alike: their code alone differs
        changed = _rewritten(
            saved["traced.pt"][0], code, lambda old: old.replace(b"bias", b"BIAS") if run else old
        )
        (out / "traced.pt").write_bytes(changed)

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE, result.sentence
    assert [v["name"] for v in result.value_differences] == [code]


def _with_torch_id(data: bytes) -> bytes:
    """The archive with its serialization id's CRC half made again from the directory, as torch's writer
    makes it (``c10::hash_combine`` over each record's CRC32 that a data descriptor follows)."""
    combined = 0
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            if info.filename.endswith(SERIALIZATION_ID):
                break
            if info.flag_bits & 0x08:
                combined ^= (info.CRC + 0x9E3779B9 + (combined << 6) + (combined >> 2)) & ((1 << 64) - 1)
    return _with_member(data, SERIALIZATION_ID, lambda old: old[:20] + b"%020d" % combined)


def test_an_unread_member_that_differs_is_never_excused(tmp_path: Path, saved: dict[str, Any]) -> None:
    def write(out: Path, run: int) -> None:
        data = saved["packaged.pt2"][0]
        if run:  # as torch would have written another ExecuTorch program: its CRC in the id too
            data = _with_member(
                data, "data/executorch/model.pte", lambda old: old.replace(b"Torch", b"TORCH")
            )
            data = _with_torch_id(data)
        (out / "packaged.pt2").write_bytes(data)

    assert_not_reproduced(two_runs(tmp_path, write), "packaged.pt2")


def test_a_weight_config_that_reaches_past_its_member_is_refused(
    tmp_path: Path, saved: dict[str, Any]
) -> None:
    config = "data/weights/model_weights_config.json"
    bigger = _with_member(
        saved["exported.pt2"][0], config, lambda old: old.replace(b'"as_int": 3}', b'"as_int": 9}', 1)
    )
    path = tmp_path / "exported.pt2"
    path.write_bytes(bigger)
    record = hash_checkpoint(path, relative_to=tmp_path)
    assert record.format == "file" and record.note is not None
    assert "lies outside storage" in record.note


WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None  # the guest reads and hashes without torch
from pathlib import Path
from reprobox.guest.hashing import hash_checkpoint
for path in map(Path, sys.argv[1:]):
    print(hash_checkpoint(path, relative_to=path.parent).content_sha256)
"""


def test_the_guest_reads_them_without_torch(tmp_path: Path, saved: dict[str, Any]) -> None:
    for name in FORMS:
        (tmp_path / name).write_bytes(saved[name][0])
    paths = [str(tmp_path / name) for name in FORMS]
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, *paths], capture_output=True, text=True, check=True
    )
    assert run.stdout.split() == [
        hash_checkpoint(Path(p), relative_to=tmp_path).content_sha256 for p in paths
    ]
