"""Files the job can write, and the code folder, are read as hostile: no hang, no link followed, no
unbounded read, no traceback; a full disk is a clear error and never stalls the job's output."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobox import codetree, saferead
from reprobox.errors import EXIT_BAD_INPUT, EnvironmentProblem, UsageError
from reprobox.guest import entrypoint
from reprobox.jobfile import load_job
from reprobox.records.guest import GuestRecord, read_guest_result
from reprobox.records.manifest import MANIFEST_NAME, move_aside_planted, read_record, write_record
from reprobox.records.trail import read_trail
from reprobox.runfolder import JobLog
from reprobox.runner import RunOptions, execute
from reprobox.runtimes.local import LocalRuntime
from reprobox.runtimes.local._process import _pump

JOBS = Path(__file__).parents[1] / "jobs"


def plant(path: Path, kind: str) -> None:
    """Put a hostile entry of `kind` at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "huge":
        with path.open("wb") as handle:
            handle.truncate(saferead.GIB + 1)  # sparse: costs no disk
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(path))
    else:
        raise AssertionError(kind)


# --- saferead ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "found"), [("fifo", "a FIFO"), ("symlink", "a symlink"), ("directory", "a directory")]
)
def test_special_files_are_refused_without_blocking(tmp_path: Path, kind: str, found: str) -> None:
    path = tmp_path / "record.json"
    plant(path, kind)
    with pytest.raises(saferead.UnsafeFile) as caught:
        saferead.read_bytes(path, 1024)
    assert caught.value.found == found
    assert str(path) in caught.value.message and found in caught.value.message


def test_a_device_node_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    path = tmp_path / "zero"
    try:
        os.mknod(path, 0o600 | 0o020000, os.makedev(1, 5))  # a character device: /dev/zero's numbers
    except PermissionError:
        pytest.skip("creating device nodes needs root")
    with pytest.raises(saferead.UnsafeFile, match="a character device"):
        saferead.read_bytes(path, 1024)


def test_a_file_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big"
    plant(path, "huge")
    with pytest.raises(saferead.UnsafeFile, match="more than the 1024 bytes"):
        saferead.read_bytes(path, 1024)
    with pytest.raises(saferead.UnsafeFile, match="more than"):
        next(saferead.iter_lines(path, limit=1024, line_limit=10))


def test_a_link_on_the_way_below_root_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "guest.json").write_text("{}")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".reprobox").symlink_to(elsewhere)
    assert saferead.read_json(run_dir / ".reprobox" / "guest.json", 100) == {}  # no root: followed
    with pytest.raises(saferead.UnsafeFile, match="which is a symlink, not a folder"):
        saferead.read_json(run_dir / ".reprobox" / "guest.json", 100, root=run_dir)


def test_read_json_reports_bad_json_and_bad_shape(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b"\xff{")
    with pytest.raises(saferead.UnsafeFile, match="is not valid JSON"):
        saferead.read_json(path, 100)
    path.write_text("[" * 100_000)
    with pytest.raises(saferead.UnsafeFile, match="nests JSON too deeply"):
        saferead.read_json(path, 1 << 20)
    path.write_text("[1]")
    with pytest.raises(saferead.UnsafeFile, match="not an object"):
        saferead.read_json(path, 100, check=lambda d: None if isinstance(d, dict) else "is not an object")


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    line_limit=st.integers(min_value=1, max_value=50),
    newline_at_end=st.booleans(),
)
def test_iter_lines_streams_lines_and_marks_overlong_ones(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], line_limit: int, newline_at_end: bool
) -> None:
    path = tmp_path_factory.mktemp("lines") / "trail.jsonl"
    content = b"\n".join(lines) + (b"\n" if newline_at_end and lines else b"")
    path.write_bytes(content)
    expected = [line if len(line) <= line_limit else None for line in content.split(b"\n")]
    if content.endswith(b"\n") or not content:  # split's last, empty piece is no line
        expected.pop()
    got = list(saferead.iter_lines(path, limit=1 << 20, line_limit=line_limit))
    assert got == expected


# --- the guest's result -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "found"),
    [("fifo", "a FIFO"), ("symlink", "a symlink"), ("directory", "a directory"), ("socket", "a socket")],
)
def test_a_replaced_guest_result_fails_the_run_with_a_reason(tmp_path: Path, kind: str, found: str) -> None:
    plant(tmp_path / ".reprobox" / "guest.json", kind)
    result = read_guest_result(tmp_path)
    assert result.record is None
    assert result.problem == (
        f"the job replaced reprobox's record .reprobox/guest.json with {found}; the run cannot be trusted"
    )


def test_a_huge_or_misshapen_guest_result_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    plant(tmp_path / ".reprobox" / "guest.json", "huge")
    assert "more than the" in str(read_guest_result(tmp_path).problem)
    (tmp_path / ".reprobox" / "guest.json").write_text(json.dumps({"exit_code": 0, "checkpoints": "x"}))
    assert "has checkpoints of type str" in str(read_guest_result(tmp_path).problem)
    (tmp_path / ".reprobox" / "guest.json").write_text(json.dumps({"exit_code": 0, "checkpoints": []}))
    assert read_guest_result(tmp_path).record == GuestRecord(exit_code=0, checkpoints=[])
    (tmp_path / ".reprobox" / "guest.json").unlink()
    assert read_guest_result(tmp_path).problem is None  # missing: the runner's own sentence covers it


def test_the_guest_skips_planted_fingerprints_and_stop_files(tmp_path: Path) -> None:
    state = tmp_path / ".reprobox"
    plant(state / "stop.json", "fifo")
    plant(state / "fingerprint-rank0.json", "fifo")
    plant(state / "fingerprint-rank1.json", "symlink")
    (state / "fingerprint-rank2.json").write_text(json.dumps({"torch": "2.x"}))
    assert entrypoint._stopped_early(tmp_path) is None
    assert entrypoint._fingerprint(tmp_path, {}) == {"torch": "2.x"}


# --- trails -----------------------------------------------------------------------------------------


def test_bad_trail_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    good = {"step": 1, "params": {"w": ["abc", 1.0, 2.0]}, "scalars": {"loss": 0.5}}
    lines = [
        json.dumps({"schema": "reprobox.trail/1", "every": 1}),
        json.dumps(good),
        "not json",
        json.dumps([1, 2]),
        json.dumps({"step": "one", "params": {}}),
        json.dumps({"step": 2, "params": {"w": "abc"}}),
        json.dumps({"step_scalars": 3, "scalars": {"loss": "high"}}),
        "",
        '{"step": 4, "params"',  # torn last line
    ]
    path = tmp_path / "trail.jsonl"
    path.write_text("\n".join(lines))
    trail = read_trail(path)
    assert trail.every == 1 and list(trail.steps) == [1] and trail.scalars == {1: {"loss": 0.5}}
    assert trail.skipped == 6


def test_a_planted_trail_is_refused_not_read(tmp_path: Path) -> None:
    plant(tmp_path / "trail.jsonl", "fifo")
    with pytest.raises(saferead.UnsafeFile, match="is a FIFO"):
        read_trail(tmp_path / "trail.jsonl", root=tmp_path)
    assert read_trail(tmp_path / "missing.jsonl").steps == {}


# --- the manifest -----------------------------------------------------------------------------------


def test_a_planted_manifest_folder_is_moved_aside(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_NAME).mkdir()
    reason = move_aside_planted(tmp_path)
    assert reason is not None and "created a directory at manifest.json" in reason
    (aside,) = tmp_path.glob("manifest.json.planted-*")
    assert aside.is_dir() and aside.name in reason
    assert move_aside_planted(tmp_path) is None
    (tmp_path / MANIFEST_NAME).mkdir()
    write_record(tmp_path, {"status": "failed"})  # a folder appearing late is moved aside too
    assert read_record(tmp_path).status == "failed"


def test_a_full_disk_while_writing_the_record_leaves_no_half_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_space(*_args: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(EnvironmentProblem, match=r"is full: \d+ bytes free; free space and rerun"):
        write_record(tmp_path, {"status": "succeeded"})
    assert list(tmp_path.iterdir()) == []


@contextlib.contextmanager
def small_tmpfs(folder: Path) -> Iterator[Path]:
    folder.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], check=True, capture_output=True
        )
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("mounting a small tmpfs is not permitted here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


def test_a_really_full_disk_is_a_clear_error(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "small") as disk:
        (disk / "filler").write_bytes(b"\0" * (60 << 10))
        with contextlib.suppress(OSError):
            (disk / "rest").write_bytes(b"\0" * (64 << 10))
        with pytest.raises(EnvironmentProblem, match=f"the disk holding {disk} is full: 0 bytes free"):
            write_record(disk, {"status": "succeeded", "pad": "x" * (32 << 10)})
        assert not any(p.name.startswith(".manifest.json") for p in disk.iterdir())
        with (disk / "stdout.log").open("wb") as log:
            sink = JobLog(log, None)
            for _ in range(16):
                sink.write(b"y" * 8192)
        assert sink.lost == os.strerror(errno.ENOSPC)


# --- the job's output -------------------------------------------------------------------------------


class _FullDisk(io.BytesIO):
    def write(self, _data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_the_log_sink_gives_up_the_log_but_keeps_echoing() -> None:
    echoed: list[bytes] = []
    sink = JobLog(_FullDisk(), echoed.append)
    sink.write(b"one")
    sink.write(b"two")
    assert sink.lost == "No space left on device" and echoed == [b"one", b"two"]


def test_the_pump_keeps_draining_when_the_sink_fails() -> None:
    class Failing:
        chunks = 0

        def write(self, _chunk: bytes) -> None:
            self.chunks += 1
            raise OSError(errno.ENOSPC, "No space left on device")

    reader, writer = os.pipe()
    sink = Failing()
    with os.fdopen(reader, "rb") as stream:
        pump = threading.Thread(target=_pump, args=(stream, sink), daemon=True)
        pump.start()
        with os.fdopen(writer, "wb") as out:
            for _ in range(64):  # far more than a pipe holds: a stalled pump would block this writer
                out.write(b"z" * 65536)
                out.flush()
        pump.join(timeout=10)
        assert not pump.is_alive() and sink.chunks >= 64


# --- real jobs on the local runtime -----------------------------------------------------------------


def run_job(name: str, runs_dir: Path) -> Any:
    return execute(load_job(JOBS / name), LocalRuntime(), RunOptions(runs_dir=runs_dir))


def test_a_job_that_plants_folders_over_the_records_fails_clearly(tmp_path: Path) -> None:
    record = run_job("plants-records", tmp_path)
    assert record.status == "failed"
    assert "the job replaced reprobox's record .reprobox/guest.json with a directory" in str(record.failure)
    assert "the job created a directory at manifest.json" in str(record.failure)
    assert read_record(record.run_dir).status == "failed"
    assert len(list(record.run_dir.glob("manifest.json.planted-*"))) == 1


def test_a_job_that_plants_fifos_does_not_hang_the_guest(tmp_path: Path) -> None:
    record = run_job("plants-fifos", tmp_path)
    assert record.succeeded, record.failure
    assert b"planted" in (record.run_dir / "stdout.log").read_bytes()


# --- the code folder --------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "found"), [("fifo", "a FIFO"), ("socket", "a socket")])
def test_special_files_in_the_code_folder_are_refused(tmp_path: Path, kind: str, found: str) -> None:
    (tmp_path / "train.py").write_text("print(1)\n")
    plant(tmp_path / "data" / "feed", kind)
    with pytest.raises(UsageError) as caught:
        codetree.digest_tree(tmp_path)
    assert caught.value.exit_code == EXIT_BAD_INPUT
    assert f"{tmp_path / 'data' / 'feed'} is {found}" in caught.value.message
    (tmp_path / ".reproboxignore").write_text("data/\n")
    assert set(codetree.digest_tree(tmp_path).files) == {"train.py", ".reproboxignore"}


def test_a_symlink_loop_in_the_code_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "dangling").symlink_to("nowhere")  # unresolvable but not a loop: recorded as a link
    with pytest.raises(UsageError, match="is a symlink loop"):
        codetree.digest_tree(tmp_path)
    (tmp_path / "a").unlink()
    (tmp_path / "b").unlink()
    assert codetree.digest_tree(tmp_path).files == {"dangling": "link:nowhere"}


def test_a_run_dir_from_elsewhere_with_a_planted_manifest_is_refused_not_followed(tmp_path: Path) -> None:
    from reprobox.errors import SpecError
    from reprobox.records.manifest import read_record

    fifo_run, link_run = tmp_path / "fifo", tmp_path / "link"
    fifo_run.mkdir()
    link_run.mkdir()
    os.mkfifo(fifo_run / "manifest.json")  # reading it would block forever
    (link_run / "manifest.json").symlink_to("/dev/zero")  # reading it would never end
    for run, found in ((fifo_run, "FIFO"), (link_run, "symlink")):
        with pytest.raises(SpecError, match=found):
            read_record(run)


def test_a_fifo_planted_as_the_reference_trail_is_no_reference(tmp_path: Path) -> None:
    """The guest compares its steps with a reference run's trail while both run; a job in the reference
    run that replaces its trail by a FIFO must not hang this run (opening a FIFO blocks)."""
    from reprobox.guest.trail_reference import ReferenceTrail
    from reprobox.records.trail import StepRecord

    planted = tmp_path / "trail.jsonl"
    os.mkfifo(planted)
    reference = ReferenceTrail(tmp_path, str(planted))
    assert reference.differs(StepRecord(1, {"w": ["sha256:aa", 1.0, 1.0]})) == []
    assert reference.finished
