"""Archive members whose names differ only by what each run's own record explains pair across runs, as
output files do, and their contents are still compared.

The archives are built as skops writes them (``skops.io.dump``): a zip of ``schema.json`` and one stored
member per array, named by the array's ``id()`` in decimal (an address inside the run's memory map), and
a booster's raw UBJSON bytes named by a uuid4 the run drew; ``schema.json`` names each member in a
``file`` field where its object lies. The runs' records hold the memory map and the entropy draws the
guest records.
"""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from pathlib import Path

import numpy as np

from reprobox import compare
from reprobox.compare._members import PAIRED_MEMBER
from reprobox.guest.hashing import hash_outputs
from reprobox.records.manifest import RunRecord
from reprobox.runspecific import MEMORY_ADDRESS, RANDOM_ID
from tests.fuzz.seeds import ubjson as encode
from tests.unit.test_ubjson_reader import MODEL

MAPS = ((0x7F0000000000, 0x7F0000400000), (0x7E1000000000, 0x7E1000400000))  # each run's memory map
DRAWS = (bytes(range(16)), bytes(range(100, 116)))  # what each run drew from the OS's entropy
CLASSES = np.array([0, 1, 2])
COEF = np.arange(6, dtype=np.float64).reshape(3, 2) / 7


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def skops_zip(run: int, arrays: dict[str, np.ndarray], *, swap: bool = False, inside: bool = True) -> bytes:
    """A skops-like file: each array a member named by an address (inside the run's map, or not), the
    booster a member named by the run's uuid4, ``schema.json`` naming each (``swap``: two fields name
    each other's member)."""
    start = MAPS[run][0] if inside else 0x100000000000
    names = {field: f"{start + 0x1000 * (index + 1) + 16 * run}.npy" for index, field in enumerate(arrays)}
    booster = f"{uuid.UUID(bytes=DRAWS[run], version=4)}.bin"
    shown = dict(names)
    if swap:
        first, second = list(names)[:2]
        shown[first], shown[second] = names[second], names[first]
    schema = {
        "__class__": "GridSearchCV",
        "content": {field: {"__loader__": "NdArrayNode", "file": shown[field]} for field in arrays},
    }
    schema["content"]["booster"] = {"__loader__": "BytearrayNode", "file": booster}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for field, name in names.items():
            archive.writestr(name, _npy(arrays[field]))
        archive.writestr(booster, encode(MODEL))
        archive.writestr("schema.json", json.dumps(schema, indent=2))
    return buffer.getvalue()


def make_run(root: Path, run: int, data: bytes, *, draws: bool = True) -> RunRecord:
    run_dir = root / f"r{run}"
    outputs = run_dir / "outputs"
    outputs.mkdir(parents=True)
    (outputs / "my-model.skops").write_bytes(data)
    readings = {"clocks": [], "draws": [DRAWS[run].hex()] if draws else [], "memory": [list(MAPS[run])]}
    record = {
        "run_id": f"r{run}",
        "status": "succeeded",
        "job": {},
        "run_facts": {"readings": {**readings, "dropped": 0}},
        "checkpoints": [d.to_json() for d in hash_outputs(outputs, [])],
    }
    return RunRecord(run_dir.resolve(), record)


def _compared(tmp_path: Path, a: bytes, b: bytes, *, draws: bool = True) -> compare.Comparison:
    return compare.compare_runs([make_run(tmp_path, 0, a), make_run(tmp_path, 1, b, draws=draws)])


def _member_entries(result: compare.Comparison) -> list[dict[str, object]]:
    return [e for e in result.run_specific if str(e["reason"]).startswith("member name")]


def test_members_named_by_the_runs_own_addresses_and_draws_pair(tmp_path: Path) -> None:
    arrays = {"classes_": CLASSES, "coef_": COEF}
    result = _compared(tmp_path, skops_zip(0, arrays), skops_zip(1, arrays))
    assert result.grade == compare.REPRODUCED, result.sentence
    assert not result.value_differences and not result.differences
    reasons = sorted(str(e["reason"]) for e in _member_entries(result))
    assert reasons == [f"member name: {MEMORY_ADDRESS}"] * 2 + [f"member name: {RANDOM_ID}"]
    files = [e for e in result.run_specific if str(e["name"]).endswith(".file")]
    assert len(files) == 3 and all(str(e["reason"]).startswith(PAIRED_MEMBER) for e in files)


def test_a_real_difference_under_paired_names_is_named_by_run_as_member(tmp_path: Path) -> None:
    a = skops_zip(0, {"classes_": CLASSES, "coef_": COEF})
    b = skops_zip(1, {"classes_": CLASSES, "coef_": COEF + 1e-9})
    result = _compared(tmp_path, a, b)
    assert result.grade == compare.NOT_REPRODUCIBLE
    coef_member = f"{MAPS[0][0] + 0x2000}.npy"
    assert [d["name"] for d in result.differences] == [coef_member]
    assert not result.value_differences  # the names, and the fields naming them, are run-specific


def test_arrays_swapped_between_fields_are_a_difference(tmp_path: Path) -> None:
    """Run b names the same two arrays from each other's fields: pairing follows the fields, so the
    arrays under them differ, whatever pairing by content alone would say."""
    arrays = {"classes_": np.array([1.0, 2.0]), "coef_": np.array([2.0, 1.0])}
    result = _compared(tmp_path, skops_zip(0, arrays), skops_zip(1, arrays, swap=True))
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert len(result.differences) == 2


def test_names_no_record_explains_stay_in_one_run_only(tmp_path: Path) -> None:
    """Numbers outside the runs' memory maps and a uuid4 no draw of the run holds name no run."""
    arrays = {"classes_": CLASSES, "coef_": COEF}
    a, b = skops_zip(0, arrays, inside=False), skops_zip(1, arrays, inside=False)
    result = _compared(tmp_path, a, b, draws=False)
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert not _member_entries(result)
    assert {e.get("note") for e in result.value_differences} >= {"present in one run only"}
    assert len(result.differences) >= 4  # each run's two arrays, present in it alone


def test_members_nothing_names_pair_by_content_and_the_one_left(tmp_path: Path) -> None:
    """Three arrays masking alike, no field naming them: the equal ones pair by content, the one left on
    each side pairs by its name, and its difference is named."""

    def zipped(run: int, last: float) -> bytes:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for index, value in enumerate((1.0, 2.0, last)):
                archive.writestr(f"{MAPS[run][0] + 0x100 * (3 - index)}.npy", _npy(np.full(4, value)))
        return buffer.getvalue()

    result = _compared(tmp_path, zipped(0, 3.0), zipped(1, 3.5))
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert [d["name"] for d in result.differences] == [f"{MAPS[0][0] + 0x100}.npy"]
    assert len(_member_entries(result)) == 3
