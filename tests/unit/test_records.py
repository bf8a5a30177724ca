"""The records reprobox writes and reads back: one writer, one validating reader each.

Every reader is shown a valid record, fields of the wrong type, a file over its size limit and a
version it does not read; the shared leaf is shown atomic writes and JSON numbers.
"""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reprobox import attest, saferead
from reprobox import fileio as files
from reprobox._version import __version__
from reprobox.errors import SpecError
from reprobox.records import attestation, guest, manifest, trail
from reprobox.records.guest import GuestRecord, read_guest_result, write_guest_record
from reprobox.records.manifest import RunRecord, read_record, rewrite_record, write_record
from reprobox.records.trail import (
    HashTrail,
    StepRecord,
    StepScalars,
    StoppedEarly,
    TrailHeader,
    decode_line,
    encode_line,
    read_trail,
)


def sparse(path: Path, size: int) -> None:
    """A file of `size` bytes that costs no disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)


# --- the leaf: atomic writes, bounded JSON, numbers -----------------------------------------------------


def test_atomic_write_replaces_whole_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "record.json"
    files.write_json_atomic(path, {"b": 1, "a": [1, 2]})
    assert path.read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
    assert stat.S_IMODE(path.stat().st_mode) == files.PRIVATE
    files.write_json_atomic(path, {"a": 2}, indent=None, sync_folder=True)
    assert path.read_text() == '{"a": 2}\n'
    assert sorted(p.name for p in path.parent.iterdir()) == ["record.json"]


def test_atomic_write_modes(tmp_path: Path) -> None:
    public = tmp_path / "public.txt"
    files.write_text_atomic(public, "x", mode=0o644)
    assert stat.S_IMODE(public.stat().st_mode) == 0o644
    umask = os.umask(0o027)
    try:
        files.write_text_atomic(tmp_path / "as-new.txt", "x", mode=None)
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "as-new.txt").stat().st_mode) == 0o640


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "out.tar"
    path.write_text("old")
    with pytest.raises(RuntimeError), files.AtomicFile(path) as handle:
        handle.write(b"half of it")
        raise RuntimeError("the disk filled up")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.tar"]


def test_replace_symlink_switches_in_one_step(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    files.replace_symlink(tmp_path / "latest", "one")
    files.replace_symlink(tmp_path / "latest", "two")
    assert (tmp_path / "latest").readlink() == Path("two")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "one", "two"]


def test_json_number_writes_what_json_has_no_literal_for() -> None:
    assert files.json_number(math.nan) == "nan"
    assert files.json_number(math.inf) == "inf"
    assert files.json_number(-math.inf) == "-inf"
    assert files.json_number(1.5) == 1.5
    assert files.json_number(None) is None


def test_bounded_json_refuses_deep_nesting() -> None:
    assert files.json_depth({"a": [1, {"b": 2}]}) == 3
    assert files.json_depth(7) == 0
    with pytest.raises(files.JsonTooDeep):
        files.loads_bounded("[" * 10 + "]" * 10, max_depth=9)
    assert files.loads_bounded("[" * 9 + "]" * 9, max_depth=9) is not None


def test_the_records_guest_side_stays_light() -> None:
    """The guest imports the trail format in every job process that imports torch.

    Counted from after interpreter start-up: an editable install's import finder (a .pth file) may
    itself load typing, which the wheel in the image does not.
    """
    code = (
        "import sys; before = set(sys.modules); import reprobox.records.trail; "
        "print(sorted(m for m in {heavy!r} if m in sys.modules and m not in before))"
    )
    heavy = ("typing", "dataclasses", "tempfile", "yaml", "torch", "docker", "reprobox.saferead")
    found = subprocess.run(
        [sys.executable, "-c", code.format(heavy=heavy)], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"


# --- guest.json -----------------------------------------------------------------------------------------


def a_guest_record() -> GuestRecord:
    return GuestRecord(
        command=["python", "train.py"],
        exit_code=0,
        started_at="2024-01-01T00:00:00Z",
        ended_at="2024-01-01T00:01:00Z",
        stopped_early=StoppedEarly("max_steps", 10),
        environment={"PYTHONHASHSEED": "0"},
        checkpoints=[{"path": "model.pt", "file_sha256": "0" * 64}],
        fingerprint={"torch": "2.x"},
    )


def test_the_guest_record_reads_back_as_written(tmp_path: Path) -> None:
    record = a_guest_record()
    write_guest_record(tmp_path, record)
    written = json.loads((tmp_path / ".reprobox" / "guest.json").read_text())
    assert written["schema"] == guest.GUEST_SCHEMA
    assert written["signal"] is None and "hash_error" not in written  # the fields as the guest wrote them
    assert read_guest_result(tmp_path) == guest.GuestResult(record)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("exit_code", "0", "has exit_code of type str"),
        ("signal", True, "has signal of type bool"),
        ("command", ["python", 3], "has a command that is not a list of strings"),
        ("environment", {"A": 1}, "has an environment whose values are not all strings"),
        ("checkpoints", ["model.pt"], "has checkpoints that are not JSON objects"),
        ("stopped_early", {"reason": "max_steps", "step": -1}, "has a stopped_early that is not"),
    ],
)
def test_a_guest_record_of_the_wrong_types_is_a_problem(
    tmp_path: Path, field: str, value: Any, problem: str
) -> None:
    write_guest_record(tmp_path, {**a_guest_record().to_json(), field: value})
    result = read_guest_result(tmp_path)
    assert result.record is None
    assert problem in str(result.problem) and str(result.problem).endswith("the run cannot be trusted")


def test_a_guest_record_over_its_limit_is_a_problem(tmp_path: Path) -> None:
    sparse(tmp_path / ".reprobox" / "guest.json", guest.GUEST_RESULT_LIMIT + 1)
    assert "more than the" in str(read_guest_result(tmp_path).problem)


def test_a_guest_record_of_another_version_is_refused_with_what_to_do(tmp_path: Path) -> None:
    write_guest_record(tmp_path, {**a_guest_record().to_json(), "schema": "reprobox.guest/2"})
    problem = str(read_guest_result(tmp_path).problem)
    assert problem == (
        f"reprobox's record .reprobox/guest.json has schema 'reprobox.guest/2', a version this reprobox "
        f"({__version__}) does not read (it reads 'reprobox.guest/1'); install the same reprobox version "
        "where the job runs as where you run reprobox; the run cannot be trusted"
    )
    write_guest_record(tmp_path, {**a_guest_record().to_json(), "schema": "other/1"})
    assert "it was not written by reprobox's guest" in str(read_guest_result(tmp_path).problem)


# --- manifest.json --------------------------------------------------------------------------------------


def a_manifest() -> dict[str, Any]:
    return {
        "run_id": "20240101T000000Z-abcdef",
        "job_name": "demo",
        "status": "succeeded",
        "seed": 3,
        "started_at": "2024-01-01T00:00:00Z",
        "job": {"trail": {"every": 5}, "compare": {"ignore": [{"file": "log.txt"}]}, "env": {"A": "1"}},
        "job_file": "/code/job.yaml",
        "job_file_sha256": "f" * 64,
        "code": {"sha256": "c" * 64, "files": {"train.py": "d" * 64}},
        "command": ["python", "train.py"],
        "runtime": {"name": "docker", "image": {"id": "sha256:" + "e" * 64}, "paths": {"mode": "stable"}},
        "checkpoints": [{"path": "model.pt", "file_sha256": "0" * 64}],
        "trail": "trail.jsonl",
        "stopped_early": {"reason": "diverged", "step": 20, "parameters": ["w"]},
        "notes": [],
    }


def test_a_manifest_reads_back_through_typed_properties(tmp_path: Path) -> None:
    write_record(tmp_path, a_manifest())
    record = read_record(tmp_path)
    assert (record.run_id, record.job_name, record.status, record.seed) == (
        "20240101T000000Z-abcdef",
        "demo",
        "succeeded",
        3,
    )
    assert record.image_id == "sha256:" + "e" * 64 and record.runtime_name == "docker"
    assert record.runtime_paths == {"mode": "stable"}
    assert record.code_sha256 == "c" * 64 and record.code_files == {"train.py": "d" * 64}
    assert record.job_file == Path("/code/job.yaml") and record.trail_every == 5
    assert record.compare_ignore == [{"file": "log.txt"}]
    assert record.trail_path == tmp_path.resolve() / "trail.jsonl"
    stopped = record.stopped_early
    assert stopped is not None and (stopped.reason, stopped.step, stopped.parameters) == (
        "diverged",
        20,
        ["w"],
    )
    assert record.stopped_short and record.prefix_check is None
    again = rewrite_record(record, status=manifest.STATUS_INTERRUPTED)
    assert read_record(tmp_path).status == "interrupted" and again.data["schema"] == manifest.RUN_SCHEMA


def test_a_record_without_optional_fields_has_their_defaults(tmp_path: Path) -> None:
    record = RunRecord(tmp_path, {"status": "failed"})
    assert record.image is None and record.image_id is None and record.runtime_name == "local"
    assert record.seed is None and record.job_file is None and record.trail_path is None
    assert record.stopped_early is None and not record.stopped_short and record.checkpoints == []


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("status", "done", "has status 'done', which reprobox never writes"),
        ("seed", -1, "has seed -1, below 0"),
        ("seed", "3", "has seed of type str"),
        ("timed_out", 0, "has timed_out of type int"),
        ("checkpoints", [{"file_sha256": "0"}], "has checkpoints that are not objects with a path"),
        ("command", "python train.py", "has command of type str"),
        ("runtime", {"image": {"id": 7}}, "has a runtime image that is not an object with an id"),
    ],
)
def test_a_manifest_of_the_wrong_types_is_refused(
    tmp_path: Path, field: str, value: Any, problem: str
) -> None:
    write_record(tmp_path, {**a_manifest(), field: value})
    with pytest.raises(SpecError) as caught:
        read_record(tmp_path)
    assert problem in str(caught.value)
    assert str(caught.value).endswith("; the record was damaged or edited: run the job again")


def test_a_manifest_over_its_limit_is_refused(tmp_path: Path) -> None:
    sparse(tmp_path / "manifest.json", manifest.MAX_MANIFEST_BYTES + 1)
    with pytest.raises(SpecError, match=r"is not a readable JSON manifest .*more than the"):
        read_record(tmp_path)


def test_a_manifest_of_another_version_is_refused_with_what_to_do(tmp_path: Path) -> None:
    files.write_json_atomic(tmp_path / "manifest.json", {**a_manifest(), "schema": "reprobox.run/2"})
    with pytest.raises(SpecError) as caught:
        read_record(tmp_path)
    assert (
        f"is 'reprobox.run/2', a version this reprobox ({__version__}) does not read (it reads "
        "'reprobox.run/1'); read it with the reprobox version that made the run (its reprobox_version)"
    ) in str(caught.value)
    files.write_json_atomic(tmp_path / "manifest.json", {"schema": "other"})
    with pytest.raises(SpecError, match=r"expected 'reprobox\.run/1'; is this a reprobox run"):
        read_record(tmp_path)


# --- trail.jsonl ----------------------------------------------------------------------------------------


def test_trail_lines_round_trip() -> None:
    step = StepRecord(4, {"w": ["abc", 1.0, 2.0]}, "m" * 64, {"loss": 0.5})
    lines = [TrailHeader(2, None, 7), step, StepScalars(3, {"accuracy": 0.25})]
    encoded = [encode_line(line) for line in lines]
    assert encoded[0] == '{"every":2,"max_steps":null,"pid":7,"schema":"reprobox.trail/1"}\n'
    decoded = [decode_line(text) for text in encoded]
    assert [type(d) for d in decoded] == [TrailHeader, StepRecord, StepScalars]
    assert [d.to_json() for d in decoded if d is not None] == [line.to_json() for line in lines]
    trail_read = HashTrail()
    for item in decoded:
        trail_read.add(item)
    assert trail_read.every == 2 and trail_read.steps[4].digests() == {"w": "abc"}
    assert trail_read.scalars == {4: {"loss": 0.5}, 3: {"accuracy": 0.25}}


@pytest.mark.parametrize(
    "item",
    [
        {"step": -1, "params": {}},
        {"step": 1.5, "params": {}},
        {"step": 1, "params": {"w": ["abc", "1", 2.0]}},
        {"step": 1, "params": {"w": ["abc", 1.0]}},
        {"step": 1, "params": {}, "model": 3},
        {"step_scalars": 1, "scalars": {"loss": None}},
        {"schema": trail.TRAIL_SCHEMA, "every": 0},
        {"schema": "someone else's"},
    ],
)
def test_trail_lines_of_the_wrong_types_are_not_records(item: dict[str, Any]) -> None:
    assert decode_line(json.dumps(item)) is None


def test_trail_lines_over_the_line_limit_are_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trail, "LINE_LIMIT", 100)
    long = {"step": 2, "params": {f"p{i}": ["abc", 1.0, 2.0] for i in range(20)}}
    path = tmp_path / "trail.jsonl"
    path.write_text(
        json.dumps({"step": 1, "params": {"w": ["abc", 1.0, 2.0]}}) + "\n" + json.dumps(long) + "\n"
    )
    read = read_trail(path)
    assert list(read.steps) == [1] and read.skipped == 1


def test_a_trail_over_its_limit_is_refused(tmp_path: Path) -> None:
    sparse(tmp_path / "trail.jsonl", trail.TRAIL_LIMIT + 1)
    with pytest.raises(saferead.UnsafeFile, match="more than the"):
        read_trail(tmp_path / "trail.jsonl", root=tmp_path)


def test_a_trail_of_another_version_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "trail.jsonl"
    path.write_text(json.dumps({"schema": "reprobox.trail/2", "every": 1}) + "\n")
    with pytest.raises(SpecError) as caught:
        read_trail(path)
    assert f"{path}: schema: is 'reprobox.trail/2', a version this reprobox" in str(caught.value)
    assert "compare this run with the reprobox version that made it" in str(caught.value)


def test_a_stop_record_is_a_reason_and_a_step() -> None:
    assert StoppedEarly.from_json({"reason": "diverged", "step": 3, "parameters": ["w"]}) is not None
    for bad in ({"reason": "x"}, {"reason": 1, "step": 1}, {"reason": "x", "step": 1, "parameters": "w"}, []):
        assert StoppedEarly.from_json(bad) is None


# --- the attestation ------------------------------------------------------------------------------------


def a_statement() -> dict[str, Any]:
    digest = "a" * 64
    predicate = {
        "schema": attestation.PREDICATE_SCHEMA,
        "job": {"name": "demo", "file": "job.yaml", "code": ".", "text": "x", "sha256": digest},
        "code": {"sha256": digest, "files": {"train.py": digest}},
        "runtime": "local",
        "image": None,
        "execution": {},
        "fingerprint": {},
        "runs": {"verified": 2, "started_at": "2024-01-01T00:00:00Z"},
        "checkpoints": [{"path": "model.pt", "file_sha256": digest, "content_sha256": digest}],
    }
    return {
        "_type": attestation.STATEMENT_TYPE,
        "predicateType": attestation.PREDICATE_TYPE,
        "predicate": predicate,
    }


def field_problems(statement: dict[str, Any]) -> list[str]:
    checker = attestation.FieldChecker(Path("a.json"))
    checker.check_predicate(statement["predicate"], lambda _checker, _execution: None)
    return [f"{p.field}: {p.message}" for p in checker.problems]


def test_a_valid_attestation_has_no_field_problems() -> None:
    statement = a_statement()
    assert attestation.version_problem(statement, Path("a.json")) is None
    assert field_problems(statement) == []
    read = attestation.Attestation(Path("a.json"), statement)
    assert read.verified_runs == 2 and read.image_id is None and read.runs_started_at.startswith("2024")


def test_attestation_fields_of_the_wrong_types_are_named() -> None:
    statement = a_statement()
    statement["predicate"]["runs"] = {"verified": "2"}
    statement["predicate"]["checkpoints"][0]["file_sha256"] = "not hex"
    assert field_problems(statement) == [
        "predicate.runs.verified: must be int, not str",
        "predicate.checkpoints.0.file_sha256: must be a sha256 digest (64 lowercase hex digits)",
    ]


def test_an_attestation_over_its_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "reprobox.attestation.json"
    path.write_text(json.dumps(a_statement()))
    monkeypatch.setattr(attest._file, "MAX_ATTESTATION_BYTES", 100)
    with pytest.raises(SpecError, match="too large for an attestation"):
        attest.read_attestation(path)


def test_an_attestation_of_another_version_is_refused_with_what_to_do() -> None:
    statement = a_statement()
    statement["predicate"]["schema"] = "reprobox.attestation/2"
    problem = attestation.version_problem(statement, Path("a.json"))
    assert problem is not None and problem.field == "predicate.schema"
    assert problem.message.endswith(
        "does not read (it reads 'reprobox.attestation/1'); install the reprobox version the author used"
    )
    statement["predicateType"] = "https://example.com/other"
    problem = attestation.version_problem(statement, Path("a.json"))
    assert problem is not None and "is this a reprobox attestation?" in problem.message
