"""Faults of the controller: termination signals, internal errors, and leftovers of a killed controller."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobox import cleanup, cli, controller, crash, errors, signals
from reprobox.commands import clean, images
from reprobox.guest import settings as guest_settings
from reprobox.runtimes.local import jobprocs

ROOT = Path(__file__).resolve().parents[2]
SETSID_JOB = ROOT / "tests" / "jobs" / "setsid-escape"


def _alive(pid: int) -> bool:
    """Alive and not a zombie (a zombie is dead; only its parent has not reaped it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_for(path: Path, seconds: float = 60.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.1)
    raise AssertionError(f"{path} did not appear within {seconds} s")


def _dead_controller() -> controller.Controller:
    """The identity of a controller that has exited (a finished child process)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = controller.process_start(child.pid)
    child.wait()
    return controller.Controller(platform.node(), child.pid, start or "1")


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)]
)
def test_a_signal_stops_the_whole_local_job_and_records_it(tmp_path: Path, signum: int, code: int) -> None:
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "reprobox", "run", str(SETSID_JOB), "--runtime", "local"]
    controller_process = subprocess.Popen(
        [*argv, "--runs-dir", str(runs), "-q"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        outputs = runs / "setsid-escape"
        job_outputs = _poll_glob(outputs, "*/outputs")
        escaped = int(_wait_for(job_outputs / "escaped.pid"))
        shell = int(_wait_for(job_outputs / "shell.pid"))
        daemon = int(_wait_for(job_outputs / "daemon.pid"))
        assert _alive(escaped) and _alive(shell) and _alive(daemon)
        controller_process.send_signal(signum)
        _out, err = controller_process.communicate(timeout=60)
    finally:
        if controller_process.poll() is None:
            controller_process.kill()
    assert controller_process.returncode == code, err.decode()
    manifest = json.loads(next(outputs.glob("*/manifest.json")).read_text())
    assert manifest["status"] == "interrupted"
    deadline = time.monotonic() + 5
    while (_alive(escaped) or _alive(shell) or _alive(daemon)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(escaped), "the job's setsid child outlived the run"
    assert not _alive(daemon), "the job's double-forked daemon outlived the run"
    assert not _alive(shell)


def test_a_signal_to_a_parallel_verify_stops_and_records_every_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "reprobox", "verify", str(SETSID_JOB), "--runtime", "local"]
    argv += ["--runs", "2", "--parallel", "2", "--no-attestation", "--runs-dir", str(runs), "-q"]
    # fixed folders serialise a job's runs; the namespace lets both run at once, as on a cluster
    verify = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        outputs = runs / "setsid-escape"
        deadline = time.monotonic() + 60
        while len(list(outputs.glob("*/outputs/shell.pid"))) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        shells = [int(_wait_for(p)) for p in outputs.glob("*/outputs/shell.pid")]
        verify.send_signal(signal.SIGTERM)
        _out, err = verify.communicate(timeout=60)
    finally:
        if verify.poll() is None:
            verify.kill()
    assert verify.returncode == 143, err.decode()
    statuses = [json.loads(m.read_text())["status"] for m in outputs.glob("*/manifest.json")]
    assert statuses and set(statuses) == {"interrupted"}, statuses
    assert not any(_alive(pid) for pid in shells)


@pytest.mark.parametrize("delay", [0.05, 0.3, 0.7, 1.2, 2.0])
def test_a_signal_at_any_moment_leaves_a_whole_record_or_none(tmp_path: Path, delay: float) -> None:
    """Before the run dir exists, while the job starts, while it runs: never a traceback, a half record
    or a process left behind."""
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "reprobox", "run", str(SETSID_JOB), "--runtime", "local"]
    process = subprocess.Popen(
        [*argv, "--runs-dir", str(runs), "-q"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        time.sleep(delay)
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    # 143: reprobox stopped and recorded the run; -15: the signal's default action ended the interpreter
    # while it was still starting, before reprobox installed its handlers or made anything
    assert process.returncode in (143, -signal.SIGTERM), err.decode()
    assert b"Traceback" not in err
    if process.returncode < 0:
        assert not list(runs.glob("setsid-escape/2*"))
    for run_dir in runs.glob("setsid-escape/2*"):
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == "interrupted"
        for pid_file in (run_dir / "outputs").glob("*.pid"):
            pid = int(pid_file.read_text().strip() or 0)
            deadline = time.monotonic() + 5
            while pid and _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not (pid and _alive(pid)), f"{pid_file.name} outlived the run"


def _poll_glob(folder: Path, pattern: str, seconds: float = 60.0) -> Path:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = sorted(folder.glob(pattern)) if folder.is_dir() else []
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"nothing matched {folder}/{pattern} within {seconds} s")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(signals.HANDLED), min_size=1, max_size=6))
def test_only_the_first_signal_or_a_repeated_ctrl_c_raises(received: list[int]) -> None:
    caught = signals.Caught()
    for index, signum in enumerate(received):
        should_raise = index == 0 or signum == signal.SIGINT
        if should_raise:
            with pytest.raises(signals.SignalInterrupt) as raised:
                caught.handle(signum, None)
            assert isinstance(raised.value, KeyboardInterrupt) and raised.value.signum == signum
        else:
            caught.handle(signum, None)
    assert caught.first == received[0]
    assert caught.exit_code() == 128 + received[0]


def test_interrupted_exit_code_follows_the_signal() -> None:
    assert errors.Interrupted().exit_code == 130
    assert errors.Interrupted(signal_number=signal.SIGTERM).exit_code == 143
    assert errors.Interrupted(signal_number=signal.SIGHUP).exit_code == 129


def test_handlers_are_restored_after_the_command() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with signals.interrupting():
        assert signal.getsignal(signal.SIGTERM) != before
    assert signal.getsignal(signal.SIGTERM) == before


def _crashing_images(_args: object, _out: object) -> int:
    raise RuntimeError("boom\nsecond line of the message")


def test_an_internal_error_exits_70_with_one_line_and_a_traceback_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(images, "images_command", _crashing_images)
    code = cli.main(["images", "--runs-dir", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == errors.EXIT_INTERNAL == 70
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "bug" in lines[0] and "RuntimeError: boom second line" in lines[0]
    reports = list((tmp_path / "cache" / "reprobox").glob("crash-*.txt"))
    assert len(reports) == 1 and str(reports[0]) in lines[0]
    text = reports[0].read_text()
    assert "Traceback" in text and "_crashing_images" in text and "RuntimeError: boom" in text


def test_an_internal_error_with_json_prints_one_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(images, "images_command", _crashing_images)
    assert cli.main(["images", "--runs-dir", str(tmp_path), "--json"]) == 70
    data = json.loads(capsys.readouterr().out)
    assert data["error"]["exit_code"] == 70 and Path(data["error"]["crash_report"]).is_file()


def test_the_crash_report_falls_back_to_the_temporary_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "home-is-a-file"
    blocked.write_text("")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(blocked))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    saved = crash.save_crash(ValueError("x"), ["run"])
    assert saved is not None and saved.parent == tmp_path / "tmp"
    assert "ValueError: x" in saved.read_text()


def test_controller_identity_round_trips_and_knows_the_dead() -> None:
    me = controller.current()
    assert controller.decode(me.encode()) == me and me.alive()
    assert controller.from_labels(me.labels()) == me
    assert not _dead_controller().alive()
    assert controller.Controller("another-host.example", 1, "1").alive()  # cannot look: assume alive
    assert controller.decode("garbage") is None and controller.decode("host notapid 1") is None


def _plant_run(runs: Path, name: str, owner: controller.Controller | None) -> Path:
    run_dir = runs / "job" / name
    (run_dir / "outputs").mkdir(parents=True)
    if owner is not None:
        claim = controller.claim_path(run_dir)
        claim.parent.mkdir(exist_ok=True)
        claim.write_text(json.dumps({"host": owner.host, "pid": owner.pid, "start": owner.start}))
    return run_dir


def test_clean_lists_then_removes_only_runs_of_dead_controllers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    orphan = _plant_run(runs, "20260101T000000Z-aaaaaa", _dead_controller())
    unclaimed = _plant_run(runs, "20260101T000001Z-bbbbbb", None)
    live = _plant_run(runs, "20260101T000002Z-cccccc", controller.current())
    finished = _plant_run(runs, "20260101T000003Z-dddddd", _dead_controller())
    (finished / "manifest.json").write_text("{}")
    monkeypatch.setattr(clean, "_engine", lambda: None)

    assert cli.main(["clean", "--runs-dir", str(runs), "--dry-run", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    listed = {item["target"] for item in data["leftovers"] if item["kind"] == "run-dir"}
    assert listed == {str(orphan), str(unclaimed)}
    assert data["dry_run"] and not any(item["removed"] for item in data["leftovers"])
    assert orphan.is_dir() and unclaimed.is_dir()

    assert cli.main(["clean", "--runs-dir", str(runs)]) == 0
    text = capsys.readouterr().out
    assert f"removed run-dir {orphan}" in text
    assert not orphan.exists() and not unclaimed.exists()
    assert live.is_dir() and finished.is_dir()
    assert not controller.claim_path(orphan).exists()


def test_clean_kills_job_processes_of_a_dead_controller_only(tmp_path: Path) -> None:
    dead = _dead_controller()

    def start(owner: controller.Controller, run_id: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, controller.CONTROLLER_VARIABLE: owner.encode(), guest_settings.RUN_ID: run_id}
        return subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)

    orphan, kept = start(dead, "orphan-run"), start(controller.current(), "live-run")
    try:
        time.sleep(0.3)  # let exec settle so /proc shows the new environment
        found = {item.target: item for item in cleanup.find_processes()}
        assert "live-run" not in found
        assert found["orphan-run"].pids == (orphan.pid,)
        cleanup.remove(found["orphan-run"], None)
        assert orphan.wait(timeout=10) == -signal.SIGKILL
        assert kept.poll() is None
    finally:
        for process in (orphan, kept):
            process.kill()
            process.wait()


def test_job_processes_follow_descendants_and_the_run_id() -> None:
    table = [
        jobprocs.ProcessInfo(100, 1, 100, b""),  # the guest, leading its group
        jobprocs.ProcessInfo(101, 100, 100, b""),  # a child in the group
        jobprocs.ProcessInfo(102, 101, 102, b""),  # setsid: own group, still a descendant
        jobprocs.ProcessInfo(103, 1, 103, b"A=1\0REPROBOX_RUN_ID=r1\0"),  # an orphan that kept its env
        jobprocs.ProcessInfo(104, 1, 104, b"REPROBOX_RUN_ID=r2\0"),  # another run's
        jobprocs.ProcessInfo(105, 1, 105, b""),  # unrelated
    ]
    assert jobprocs.job_processes(100, "r1", table) == {100, 101, 102, 103}
    assert jobprocs.job_processes(100, None, table) == {100, 101, 102}
    assert jobprocs.job_processes(200, None, table) == set()  # a reaped guest's pid is not walked


def test_a_process_older_than_the_guest_is_not_read_as_one_of_the_job() -> None:
    guest = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        since = jobprocs.start_ticks(guest.pid)
        assert since >= jobprocs.start_ticks(os.getpid()) > 0
        newer = {row.pid: row for row in jobprocs.processes(since)}
        assert guest.pid in newer and newer[guest.pid].started == since
        assert os.getpid() not in newer  # started seconds before: its environment is not even read
        assert os.getpid() in {row.pid for row in jobprocs.processes()}
        assert jobprocs.job_processes(guest.pid, None, started_since=since) == {guest.pid}
    finally:
        guest.kill()
        guest.wait()


class _InterruptedBeforeStart:
    """A runtime a signal reaches before it could start the job (and so before it could catch it)."""

    name = "fake"

    def run(self, plan: object, sink: object, stop: object) -> object:
        raise signals.SignalInterrupt(signal.SIGTERM)

    def describe(self) -> dict[str, str]:
        return {"name": self.name}


def _lazy_job(tmp_path: Path) -> object:
    from reprobox.jobfile import load_job

    (tmp_path / "job.yaml").write_text("version: 1\nname: lazy\ncommand: [x]\n")
    return load_job(tmp_path / "job.yaml", host_env={})


def test_a_signal_before_the_runtime_takes_it_leaves_an_interrupted_record(tmp_path: Path) -> None:
    from reprobox.records.manifest import read_record
    from reprobox.runner import RunOptions, execute

    with pytest.raises(errors.Interrupted) as stopped:
        execute(_lazy_job(tmp_path), _InterruptedBeforeStart(), RunOptions(runs_dir=tmp_path / "runs"))  # type: ignore[arg-type]
    assert read_record(stopped.value.run_dir).status == "interrupted"


class _EngineGone:
    """A runtime whose engine stops answering as the job is to start (and when asked to describe itself)."""

    name = "gone"

    def run(self, plan: object, sink: object, stop: object) -> object:
        raise errors.EnvironmentProblem("the engine at unix:///run/docker.sock stopped answering")

    def describe(self) -> dict[str, str]:
        raise errors.EnvironmentProblem("the engine at unix:///run/docker.sock stopped answering")


def test_a_runtime_that_cannot_run_the_job_leaves_a_failed_record_and_its_error(tmp_path: Path) -> None:
    from reprobox.records.manifest import read_record
    from reprobox.runner import RunOptions, execute

    with pytest.raises(errors.EnvironmentProblem, match="stopped answering"):
        execute(_lazy_job(tmp_path), _EngineGone(), RunOptions(runs_dir=tmp_path / "runs"))  # type: ignore[arg-type]
    (run_dir,) = (tmp_path / "runs" / "lazy").glob("2*")
    record = read_record(run_dir)
    assert record.status == "failed"
    assert record.failure == (
        "did not start; the gone runtime could not run it: the engine at unix:///run/docker.sock "
        "stopped answering"
    )
    assert (tmp_path / "runs" / "lazy" / "latest").resolve() == run_dir


class _RefusesTheVariation(_EngineGone):
    def run(self, plan: object, sink: object, stop: object) -> object:
        raise errors.UsageError("the gone runtime cannot vary hostname; choose another runtime")


def test_a_plan_the_runtime_refuses_leaves_no_run_folder(tmp_path: Path) -> None:
    from reprobox.runner import RunOptions, execute

    with pytest.raises(errors.UsageError, match="cannot vary hostname"):
        execute(_lazy_job(tmp_path), _RefusesTheVariation(), RunOptions(runs_dir=tmp_path / "runs"))  # type: ignore[arg-type]
    assert [p.name for p in (tmp_path / "runs" / "lazy").iterdir() if not p.name.startswith(".")] == []
    assert list((tmp_path / "runs" / "lazy" / ".controllers").iterdir()) == []


def test_a_signal_while_the_record_is_written_still_leaves_a_whole_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reprobox import runner
    from reprobox.records.manifest import read_record
    from reprobox.runtimes.local import LocalRuntime

    real = runner.build_manifest
    calls: list[int] = []

    def interrupted_once(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise signals.SignalInterrupt(signal.SIGTERM)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "build_manifest", interrupted_once)
    (tmp_path / "job.yaml").write_text("version: 1\nname: quick\ncommand: [python, -c, 'print(1)']\n")
    from reprobox.jobfile import load_job

    job = load_job(tmp_path / "job.yaml")
    with pytest.raises(errors.Interrupted) as stopped:
        runner.execute(job, LocalRuntime(), runner.RunOptions(runs_dir=tmp_path / "runs"))
    assert read_record(stopped.value.run_dir).status == "interrupted"
    assert [p.name for p in (tmp_path / "runs" / "quick").iterdir() if p.name[0].isdigit()] == [
        stopped.value.run_dir.name
    ]
