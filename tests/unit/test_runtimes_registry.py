"""One chooser for every runtime, and one progress reporter that reaches the runs of a parallel verify."""

from __future__ import annotations

import contextvars
import importlib
import io
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli, progress, runtimes, verify
from reprobox.commands.output import Output
from reprobox.commands.plain_progress import TerminalProgress
from reprobox.errors import UsageError
from reprobox.jobfile import load_job
from reprobox.runner import RunOptions
from reprobox.runtimes.base import RunOutcome, RunPlan, RuntimeOptions
from reprobox.runtimes.slurm import create as create_slurm


def test_the_registry_names_every_runtime_and_the_cli_offers_exactly_those() -> None:
    assert runtimes.names() == ("auto", "docker", "local", "podman", "slurm")
    parser = cli.build_parser()
    subcommands = next(a for a in parser._actions if a.dest == "command").choices
    assert subcommands is not None
    for command in ("run", "verify", "audit", "fingerprint"):
        (flag,) = [a for a in subcommands[command]._actions if a.dest == "runtime"]
        assert tuple(flag.choices or ()) == runtimes.names()


def test_every_registered_module_creates_its_runtime() -> None:
    for module in runtimes.RUNTIMES.values():
        assert callable(importlib.import_module(module).create)


def test_an_unknown_runtime_is_refused_with_the_registered_names() -> None:
    with pytest.raises(
        UsageError, match="unknown runtime 'vm'; use one of auto, docker, local, podman, slurm"
    ):
        runtimes.open_runtime("vm", RuntimeOptions())


def test_local_runtime_through_the_registry_uses_the_given_interpreter() -> None:
    runtime = runtimes.open_runtime("local", RuntimeOptions(python=sys.executable))
    assert runtime.name == "local"
    assert runtime.describe()["python"] == sys.executable


def test_sbatch_args_from_the_command_line_reach_the_slurm_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UsageError, match="--sbatch-args cannot be split like shell arguments"):
        create_slurm(RuntimeOptions(sbatch_args="--partition='gpu"))
    job = tmp_path / "job.yaml"
    job.write_text("version: 1\nname: flags\ncommand: [python, -c, pass]\n")
    runs = str(tmp_path / "runs")
    code = cli.main(["run", str(job), "--runtime", "slurm", "--sbatch-args", "'x", "--runs-dir", runs])
    assert code == 2
    assert "--sbatch-args cannot be split" in capsys.readouterr().err


# -- progress ------------------------------------------------------------------------------------------


def test_progress_is_silent_unless_a_reporter_is_installed(capsys: pytest.CaptureFixture[str]) -> None:
    progress.say("nobody listens")
    progress.build_output("Step 1/2 : FROM x")
    with progress.reporting(progress.Recorder()) as outer:
        progress.say("one")
        with progress.reporting(progress.Recorder()) as inner:
            progress.build_output("two")
        progress.say("three")
    progress.say("gone")
    assert (outer.lines, inner.lines) == (["one", "three"], ["two"])
    assert capsys.readouterr() == ("", "")


def test_threads_report_only_when_started_in_a_copy_of_the_context() -> None:
    with progress.reporting(progress.Recorder()) as reported:
        plain = threading.Thread(target=progress.say, args=("lost",))
        copied = threading.Thread(target=contextvars.copy_context().run, args=(progress.say, "kept"))
        for thread in (plain, copied):
            thread.start()
            thread.join()
    assert reported.lines == ["kept"]


class _ReportingRuntime:
    """Reports from the thread its run runs in, then fails the run (it starts no guest)."""

    name = "reporting"

    def run(self, plan: RunPlan, sink: Any, stop: threading.Event | None = None) -> RunOutcome:
        progress.say(f"running {plan.run_id}")
        return RunOutcome(exit_code=1)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def fingerprint(self) -> dict[str, Any]:
        return {}


def test_a_parallel_verify_reports_from_its_worker_threads(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("version: 1\nname: threads\ncommand: [x]\n")
    spec = load_job(job, host_env={})
    options = verify.VerifyOptions(runs=2, parallel=2)
    with progress.reporting(progress.Recorder()) as reported:
        _, records = verify.verify(spec, _ReportingRuntime(), RunOptions(runs_dir=tmp_path / "runs"), options)
    started = [line for line in reported.lines if line.startswith("running ")]
    assert started and len(started) == len(records)


def test_the_terminal_reporter_shows_notices_and_build_steps_but_not_build_chatter() -> None:
    stream = io.StringIO()
    reporter = TerminalProgress(stream)
    reporter.notice("run 1/2 of tiny (local)")
    reporter.build_output("Step 3/9 : RUN pip install")
    reporter.build_output("Collecting torch")  # not a terminal: no spinner, nothing shown
    assert stream.getvalue().splitlines() == [
        "reprobox: run 1/2 of tiny (local)",
        "reprobox: Step 3/9 : RUN pip install",
    ]
    assert isinstance(Output(as_json=False, quiet=True).reporter, progress.Silent)


def test_notices_from_side_by_side_runs_stay_whole_lines() -> None:
    class SlowStream(io.StringIO):
        """Yields to other threads inside each write, as a pipe to a slow reader does."""

        def write(self, text: str) -> int:
            written = super().write(text)
            time.sleep(0.001)
            return written

    stream = SlowStream()
    reporter = TerminalProgress(stream)
    threads = [
        threading.Thread(target=lambda n=n: [reporter.notice(f"run {n}: step {i}") for i in range(20)])
        for n in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = {f"reprobox: run {n}: step {i}" for n in range(4) for i in range(20)}
    assert sorted(stream.getvalue().splitlines()) == sorted(expected)
