"""The guest records what makes a run itself, and the verdict excuses a value by that record alone.

Pure parts first (the pids a job's processes had, the UTC offsets of its time zone, the record's shape),
then real jobs on the local runtime with their default job files, none importing torch: a script that
saves stamps of its own clock (local time in a zone of its own), pids, host and memory addresses; a
CleanRL-style script logging ``charts/SPS``; MLflow with an experiment made by name. The first two have
a twin in which one value truly differs, which must stay exit 1 and be named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli
from reprobox.guest import processes, runfacts
from reprobox.records.guest import GuestRecord, check_guest_record
from reprobox.records.manifest import check_manifest, read_record
from reprobox.runspecific import DURATION_COARSE, RANDOM_ID, RATE_OF_CLOCK, RunContext

JOBS = Path(__file__).parents[1] / "jobs"


def test_the_pids_of_the_jobs_processes_are_recorded_while_they_run(tmp_path: Path) -> None:
    # The child outlives several of the watch's looks wherever it starts (they come at most
    # LONGEST_LOOK_S apart): a shorter life could fall between two looks on a busy machine.
    life = 3 * processes.LONGEST_LOOK_S
    script = (
        "import subprocess, sys, pathlib;"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({life})']);"
        f"pathlib.Path({str(tmp_path / 'pid')!r}).write_text(str(child.pid)); child.wait()"
    )
    code, record = processes.run_command([sys.executable, "-c", script], dict(os.environ))
    assert code == 0
    pids = (record.run_facts or {})["pids"]
    assert int((tmp_path / "pid").read_text()) in pids and len(pids) >= 2
    assert pids == sorted(pids)


def test_descendants_follow_the_process_tree() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert child.pid in processes.descendants(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert processes.descendants(2**22 + 7) == set()  # no such process


def test_utc_offsets_are_those_of_the_jobs_time_zone() -> None:
    winter, summer = 1795826240.0, 1795826240.0 - 160 * 86400  # November and June 2026
    assert runfacts.utc_offsets("Asia/Kolkata", (winter,)) == [19800]
    assert runfacts.utc_offsets("Europe/Berlin", (summer, winter)) == [3600, 7200]
    assert runfacts.utc_offsets("UTC", (winter,)) == [0]
    before = os.environ.get("TZ")
    runfacts.utc_offsets("America/New_York", (winter,))
    assert os.environ.get("TZ") == before  # the guest's own zone is left as it was


def test_the_run_facts_record_the_jobs_own_clock() -> None:
    env = {"REPROBOX_RUN_ID": "r1", "REPROBOX_CLOCK_OFFSET": "3600"}
    facts = runfacts.record(
        env,
        {"TZ": "UTC", "TMPDIR": "/tmp/run-tmp"},
        started_at="2026-11-28T00:37:20.000+00:00",
        ended_at="2026-11-28T00:37:50.000+00:00",
        pids=[2264],
        folders=[Path("/runs/j/r1"), None],
    )
    assert facts["clock"]["start"] == "2026-11-28T01:37:20.000+00:00"  # shifted as `--vary clock` shifts it
    assert facts["clock"]["utc_offsets"] == [0] and facts["clock"]["shift_s"] == 3600
    assert facts["pids"] == [2264] and facts["run_id"] == "r1"
    assert facts["folders"] == ["/runs/j/r1", "/tmp/run-tmp"]
    assert facts["hostnames"]
    assert check_guest_record(GuestRecord(run_facts=facts).to_json()) is None
    assert check_manifest({"run_facts": facts}) is None
    context = RunContext.from_record("/runs/j/r1", {"run_facts": facts, "run_id": "r1"})
    assert context.window is not None and context.window.start == 1795829840.0
    assert context.pids == frozenset({2264}) and "/tmp/run-tmp" in context.paths


def test_a_record_whose_pids_are_not_numbers_is_refused() -> None:
    assert "run_facts" in (check_guest_record({"run_facts": {"pids": ["1"]}}) or "")


def test_older_records_without_facts_fall_back_to_their_start_and_end() -> None:
    context = RunContext.from_record(
        "/runs/j/r1",
        {"started_at": "2026-11-28T00:37:20.000+00:00", "ended_at": "2026-11-28T00:37:50.000+00:00"},
    )
    assert context.window is not None and context.window.offsets == (0,)
    assert RunContext.from_record("/runs/j/r1", {}).window is None


# --- real jobs, default job files ------------------------------------------------------------------


def verify(capsys: pytest.CaptureFixture[str], job: Path, runs: Path) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli.main(
        [
            "verify",
            str(job),
            "--runtime",
            "local",
            "--runs-dir",
            str(runs),
            "--json",
            "-q",
            "--no-attestation",
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def excused(data: dict[str, Any]) -> dict[str, str]:
    return {
        e["name"] if e["name"] != "<file>" else e["checkpoint"]: e["reason"] for e in data["run_specific"]
    }


@pytest.mark.slow
def test_stamps_of_the_runs_own_clock_pids_and_addresses_reproduce(tmp_path: Path, capsys) -> None:
    code, data = verify(capsys, JOBS / "clock-stamps", tmp_path)
    assert (code, data["grade"]) == (0, "reproduced"), data["sentence"]
    reasons = excused(data)
    assert reasons["started_ns"] == reasons["stamp"] == "a wall-clock timestamp"
    # a name stamped to the second is equal when the two runs start in the same second (they run side by
    # side): then there is nothing to excuse; when it differs, it is excused as a reading of the clock
    assert reasons.get("wandb_run_name", "a wall-clock timestamp") == "a wall-clock timestamp"
    assert reasons["schedule"] == "a memory address inside the run's memory map"
    assert reasons["line 1"] == "a process id and a wall-clock timestamp"
    facts = read_record(data["runs"][0]).run_facts
    assert facts["clock"]["utc_offsets"] == [19800]  # the job's TZ, Asia/Kolkata
    assert facts["pids"] and facts["hostnames"]

    code, data = verify(capsys, JOBS / "clock-stamps" / "old-stamp.yaml", tmp_path)
    assert (code, data["grade"]) == (1, "not reproducible")
    assert [e["name"] for e in data["value_differences"]] == ["release"]
    assert "release" in data["sentence"]


@pytest.mark.slow
def test_a_cleanrl_style_sps_is_a_rate_and_a_noisy_entropy_is_named(tmp_path: Path, capsys) -> None:
    pytest.importorskip("tensorboard")
    code, data = verify(capsys, JOBS / "cleanrl-sps", tmp_path)
    assert (code, data["grade"]) == (0, "reproduced"), data["sentence"]
    reasons = excused(data)
    sps = {r for n, r in reasons.items() if n.startswith("charts/SPS.") and not n.endswith(".wall_time")}
    # int(steps / seconds): a whole-number rate the record matches, or too coarse for it to tell (then by
    # its name, saying so); never more
    assert sps and sps <= {RATE_OF_CLOCK, DURATION_COARSE}, sps
    # runs/<env>__<exp>__<seed>__<unix time>/events.out.tfevents.<unix time>.<host>.<pid>.0: the runs run side
    # by side, so the seconds may be equal; the pid never is
    (name,) = [n for n in reasons if n.startswith("runs/")]
    assert "wall-clock timestamp" in reasons[name] or "process id" in reasons[name]

    code, data = verify(capsys, JOBS / "cleanrl-sps" / "noisy.yaml", tmp_path)
    assert (code, data["grade"]) == (1, "not reproducible")
    assert [e["name"] for e in data["value_differences"]] == ["losses/entropy.step_256"]


@pytest.mark.slow
def test_an_mlflow_experiment_made_by_name_pairs_by_structure(tmp_path: Path, capsys) -> None:
    pytest.importorskip("mlflow")
    code, data = verify(capsys, JOBS / "mlflow-experiment", tmp_path)
    assert (code, data["grade"]) == (0, "reproduced"), data["sentence"]
    folders = {e["folder"]["a"].count("/") for e in data["run_specific"] if "folder" in e}
    assert folders == {1}  # mlruns/<experiment id>/: its id is cut from a uuid4, no draw as written
    # mlruns/<experiment id>/<run id>/: the run id is uuid4().hex, a draw the run recorded
    assert excused(data)["run_id"] == RANDOM_ID
    assert not data["one_sided_files"]  # a real difference under such folders: test_runspecific_pairing
