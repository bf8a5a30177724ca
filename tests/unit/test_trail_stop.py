"""The step hook's stop: the job ends at once, saying why, and its teardown skips the collector's passes
over everything the job had built (what makes a process that imported torch slow to exit)."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest
import torch

from reprobox.guest import trail
from reprobox.records.trail import STOP_DIVERGED, STOP_FILE, StoppedEarly


def test_a_stopped_job_says_why_and_leaves_its_objects_out_of_the_collector(tmp_path: Path) -> None:
    recorder = trail._StepRecorder(torch, tmp_path, 1, None)
    try:
        with pytest.raises(SystemExit) as stopped:
            recorder.stop(StoppedEarly(STOP_DIVERGED, 3, ["fc.weight"]))
        frozen = gc.get_freeze_count()
    finally:
        gc.unfreeze()  # this process goes on: its objects go back to the collector
        recorder.handle.close()
    assert stopped.value.code == 0
    assert frozen > 0
    written = json.loads((tmp_path / ".reprobox" / STOP_FILE).read_text())
    assert written == {"reason": "diverged", "step": 3, "parameters": ["fc.weight"]}
