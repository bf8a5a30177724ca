"""Runs side by side stop as soon as a rerun says it diverged, except that rerun, which ends on its own."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from reprobox import runstops
from reprobox.runstops import RunStops, diverged


def stop_file(run_dir: Path, content: str) -> Path:
    state = run_dir / ".reprobox"
    state.mkdir(parents=True, exist_ok=True)
    (state / "stop.json").write_text(content)
    return run_dir


def test_a_rerun_that_diverged_stops_the_others_but_not_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runstops, "POLL_SECONDS", 0.01)
    stops = RunStops()
    reference, rerun, other = stops.event(0), stops.event(1), stops.event(2)
    stops.watch(1, tmp_path / "rerun")
    stops.watch(2, stop_file(tmp_path / "other", json.dumps({"reason": "max_steps", "step": 9})))
    with stops.watching_divergence():
        time.sleep(0.05)
        assert not stops.closed.is_set()  # a prefix check's stop is no divergence
        stop_file(tmp_path / "rerun", json.dumps({"reason": "diverged", "step": 20}))
        assert reference.wait(10)
    assert other.is_set() and not rerun.is_set() and stops.closed.is_set()
    stops.stop()  # the reference's cancelled record ends verification too: the rerun still ends itself
    assert not rerun.is_set() and stops.event(3).is_set()  # and no further run starts
    stops.interrupt()
    assert rerun.is_set()


def test_without_a_divergence_a_stop_is_for_every_run() -> None:
    stops = RunStops()
    events = [stops.event(i) for i in range(3)]
    stops.stop()
    assert all(e.is_set() for e in events)


def test_only_a_well_formed_stop_file_says_diverged(tmp_path: Path) -> None:
    assert not diverged(tmp_path)  # none yet
    assert diverged(stop_file(tmp_path / "a", '{"reason": "diverged", "step": 3}'))
    assert not diverged(stop_file(tmp_path / "b", '{"reason": "diverged", "step": -1}'))
    assert not diverged(stop_file(tmp_path / "c", "not json"))
    (tmp_path / "d" / ".reprobox").mkdir(parents=True)
    os.mkfifo(tmp_path / "d" / ".reprobox" / "stop.json")  # planted: refused, never waited on
    assert not diverged(tmp_path / "d")
