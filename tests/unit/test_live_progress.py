"""Progress while runs run: the trail's last step read from its end, the run events the run loop
reports, and how the CLI shows them (plain lines off a terminal, a live line per run on one)."""

from __future__ import annotations

import io
import os
import re
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from reprobox import progress, runprogress
from reprobox.commands.live_progress import Estimates, LiveProgress, clock, run_line
from reprobox.commands.output import Output
from reprobox.commands.plain_progress import TerminalProgress
from reprobox.commands.progress_view import view_for
from reprobox.records.trail import (
    TAIL_BYTES,
    StepRecord,
    StepScalars,
    TrailHeader,
    encode_line,
    last_step,
)
from reprobox.saferead import UnsafeFile

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def step_line(step: int, names: int = 2) -> str:
    params = {f"layer{i}.weight": [f"{i:064x}", 0.5, 1.5] for i in range(names)}
    return encode_line(StepRecord(step, params, "m" * 64, {"loss": 0.7}, {"rng.torch": "r" * 64}))


# -- the trail's last step -----------------------------------------------------------------------------


def test_the_last_step_is_read_from_the_trails_end(tmp_path: Path) -> None:
    trail = tmp_path / "trail.jsonl"
    with pytest.raises(FileNotFoundError):
        last_step(trail, root=tmp_path)
    trail.write_text(encode_line(TrailHeader(1)))
    assert last_step(trail, root=tmp_path) is None  # a header: no step yet
    trail.write_text(
        encode_line(TrailHeader(1))
        + step_line(1)
        + step_line(2)
        + encode_line(StepScalars(2, {"step": 9.0, "accuracy": 0.5}))  # a value the job named "step"
        + step_line(3)[:40]  # being written: not yet a step
    )
    assert last_step(trail, root=tmp_path) == 2


def test_a_step_line_longer_than_the_tail_still_shows_its_step(tmp_path: Path) -> None:
    trail = tmp_path / "trail.jsonl"
    long = step_line(41, names=2000)
    assert len(long) > TAIL_BYTES
    trail.write_text(step_line(40) + long)
    assert last_step(trail, root=tmp_path) == 41


def test_a_planted_trail_is_refused_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "trail.jsonl")  # a reader that opened it would wait forever
    with pytest.raises(UnsafeFile):
        last_step(tmp_path / "trail.jsonl", root=tmp_path)


# -- the run loop's events -----------------------------------------------------------------------------


def test_a_watched_run_reports_its_start_its_trails_steps_and_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runprogress, "POLL_SECONDS", 0.01)
    run = progress.RunSeen("tiny", tmp_path, progress.Series(2).label(1))
    with progress.reporting(progress.Recorder()) as reported, runprogress.watching(run) as watched:
        (tmp_path / "written").write_text(step_line(1) + step_line(7))
        (tmp_path / "written").replace(tmp_path / "trail.jsonl")  # the poller sees all of it or nothing
        deadline = time.monotonic() + 10
        while ("step", run, 7) not in reported.events and time.monotonic() < deadline:
            time.sleep(0.01)
        watched.status = "succeeded"
    assert reported.events == [("started", run, None), ("step", run, 7), ("ended", run, "succeeded")]
    assert reported.lines == []  # notices stay what callers say; runs are events


def test_nothing_polls_when_nobody_listens(tmp_path: Path) -> None:
    run = progress.RunSeen("tiny", tmp_path)
    with runprogress.watching(run):
        assert not [t for t in threading.enumerate() if t.name == f"trail {tmp_path.name}"]


# -- plain lines ---------------------------------------------------------------------------------------


def test_off_a_terminal_runs_show_only_as_the_notices_of_today() -> None:
    stream = io.StringIO()
    view = view_for(stream, live=True)
    assert isinstance(view, TerminalProgress)  # not a terminal: no live view
    run = progress.RunSeen("tiny", Path("/runs/tiny/a"), progress.Series(2).label(1))
    view.notice("run 1/2 of tiny (local)")
    view.run_started(run)
    view.run_step(run, 40)
    view.run_ended(run, "succeeded")
    view.announce("not reproducible: 1 parameters differ at step 20")
    assert stream.getvalue().splitlines() == [
        "reprobox: run 1/2 of tiny (local)",
        "not reproducible: 1 parameters differ at step 20",
    ]
    assert view.job_echo() is None  # the job's output goes to stdout as it always did


def test_the_early_verdict_goes_to_stderr_unless_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    for as_json in (False, True):
        Output(as_json=as_json).early("not reproducible: x")
        assert capsys.readouterr() == ("", "not reproducible: x\n")
    Output(as_json=False, quiet=True).early("not reproducible: x")
    assert capsys.readouterr() == ("", "")


# -- the live view -------------------------------------------------------------------------------------


def test_run_lines_say_which_run_its_step_its_time_and_the_time_left() -> None:
    run = progress.RunSeen("tiny-mlp", Path("/r"), progress.Series(3).label(2))
    assert run_line(run, 340, 12.4, 7.9) == "run 2/3 of tiny-mlp: step 340, 0:12 elapsed, about 0:07 left"
    assert run_line(progress.RunSeen("tiny", Path("/r")), None, 3725, None) == "tiny: 1:02:05 elapsed"
    assert clock(59.9) == "0:59"


def test_the_time_left_counts_the_runs_not_started_yet() -> None:
    series = progress.Series(3)
    estimates = Estimates()
    first, second = series.label(1), series.label(2)
    estimates.run_started(first)
    assert estimates.left(first, 5) is None  # no run has finished: no estimate
    estimates.run_ended(first, "succeeded", 10.0)
    estimates.run_started(second)
    assert estimates.left(second, 4.0) == pytest.approx(6 + 10)  # this run's rest, then run 3
    estimates.run_ended(second, "failed", 1.0)  # a failed run stops short: not a length
    third = series.label(3)
    estimates.run_started(third)
    assert estimates.left(third, 12.0) == 0  # longer than the typical run: no guess past it
    assert estimates.left(progress.RunLabel("vary threads"), 1.0) is None  # in no series


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def live_view() -> tuple[LiveProgress, io.StringIO, FakeClock]:
    screen = io.StringIO()
    now = FakeClock()
    console = Console(file=screen, force_terminal=True, width=120, color_system=None)
    return LiveProgress(console, clock=now, auto_refresh=False), screen, now


def shown(screen: io.StringIO) -> str:
    return ANSI.sub("", screen.getvalue())


def test_on_a_terminal_each_running_run_has_a_live_line() -> None:
    view, screen, now = live_view()
    series = progress.Series(2)
    first = progress.RunSeen("tiny", Path("/runs/tiny/a"), series.label(1))
    view.notice("run 1/2 of tiny (local)")
    view.run_started(first)
    now.now += 10
    view.run_step(first, 40)
    view.refresh()
    assert "run 1/2 of tiny: step 40, 0:10 elapsed" in shown(screen)
    view.run_ended(first, "succeeded")
    assert not view.live  # nothing runs: the live area is gone
    second = progress.RunSeen("tiny", Path("/runs/tiny/b"), series.label(2))
    view.run_started(second)
    now.now += 4
    view.refresh()
    assert "run 2/2 of tiny: 0:04 elapsed, about 0:06 left" in shown(screen)
    view.notice("run 2/2: succeeded")
    view.run_ended(second, "succeeded")
    assert "reprobox: run 1/2 of tiny (local)\n" in shown(screen)
    assert "reprobox: run 2/2: succeeded\n" in shown(screen)


def test_the_jobs_output_prints_above_the_live_line_whole_lines_at_a_time() -> None:
    view, screen, _ = live_view()
    run = progress.RunSeen("tiny", Path("/runs/tiny/a"), progress.Series(2).label(1))
    view.run_started(run)
    echo = view.job_echo()
    echo(b"epoch 1\nepo")
    echo(b"ch 2\nloss 0.9\rloss 0.5\n\xc3")  # a bar redrawn with \r; a character cut in two
    echo(b"\xa9t\xc3\xa9")
    view.run_ended(run, "succeeded")  # what was left without a newline shows when the run ends
    lines = [line.rstrip() for line in shown(screen).splitlines()]
    assert [line for line in lines if "run 1/2" not in line and line] == [
        "epoch 1",
        "epoch 2",
        "loss 0.5",
        "été",
    ]


def test_side_by_side_runs_each_have_a_line_and_build_chatter_one_more() -> None:
    view, screen, _ = live_view()
    a = progress.RunSeen("tiny", Path("/runs/tiny/a"), progress.Series(2).label(1))
    b = progress.RunSeen("tiny", Path("/runs/tiny/b"), progress.Series(2).label(2))
    view.build_output("Collecting torch\n")
    view.run_started(a)
    view.run_started(b)
    view.run_step(b, 3)
    view.refresh()
    frame = shown(screen)
    assert "build: Collecting torch" in frame
    assert "run 1/2 of tiny: 0:00 elapsed" in frame and "run 2/2 of tiny: step 3, 0:00 elapsed" in frame
    view.close()
    assert not view.live and not view.rows
