"""Long runs on every runtime: a resume check and a segment spot-check in hardened containers (docker,
Podman) and as Slurm jobs, on tests/jobs/resume (12 steps, a resumable checkpoint every 4)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli
from reprobox.records.manifest import read_record
from reprobox.resume import spot

pytestmark = pytest.mark.integration

JOB = Path(__file__).parents[1] / "jobs" / "resume"


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch, offline_base: str, wheelhouse: Path) -> None:
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))


def command(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli.main([*args, "--json", "-q"])
    return code, json.loads(capsys.readouterr().out)


def local_run(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the job, run once on the local runtime: the run a spot-check checks elsewhere."""
    job = tmp_path / "job"
    shutil.copytree(JOB, job)
    runs = tmp_path / "runs"
    assert cli.main(["run", str(job), "--runtime", "local", "--runs-dir", str(runs), "-q"]) == 0
    return (runs / "resume" / "latest").resolve(), runs


def seed_drawing(run: Path, start: int) -> int:
    """A --seed whose one-segment draw is the segment starting at `start` (so the test knows what ran)."""
    segments, _total = spot.segments_of(read_record(run))
    return next(s for s in range(1000) if [x.start for x in spot.choose(segments, 1, s)] == [start])


@pytest.mark.usefixtures("offline_env")
def test_resume_check_and_spot_check_in_containers(tmp_path: Path, capsys) -> None:
    job = tmp_path / "job"
    shutil.copytree(JOB, job)
    runs = tmp_path / "runs"
    code, data = command(
        capsys,
        "verify",
        str(job),
        "--resume-at",
        "4",
        "--parallel",
        "2",
        "--runtime",
        "docker",
        "--runs-dir",
        str(runs),
    )
    assert code == 0, data["sentence"]
    resumed = read_record(data["resume"]["resumed_run"])
    assert resumed.runtime_name == "docker" and resumed.resumed_at == 4
    assert (
        resumed.runtime["container"]["user"] != "0:0"
    )  # the copied checkpoint is readable by the job's user
    assert (
        "--resume" in resumed.command
        and "/reprobox/" in resumed.command[resumed.command.index("--resume") + 1]
    )

    whole = Path(data["resume"]["uninterrupted_run"])
    code, data = command(
        capsys,
        "spot-check",
        str(whole),
        "--segments",
        "1",
        "--seed",
        str(seed_drawing(whole, 4)),
        "--runs-dir",
        str(runs),
    )
    assert code == 0, data["sentence"]
    (segment,) = data["segments"]
    assert (segment["start"], segment["end"], segment["match"]) == (4, 8, True)
    assert read_record(segment["run_dir"]).runtime_name == "docker"


def test_spot_check_segments_as_slurm_jobs(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("sinfo") is None:
        pytest.skip("no Slurm here (sinfo is not on PATH); start it with `scripts/start-slurm.sh`")
    states = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, check=False).stdout
    if not any(s.startswith(("idle", "mix", "alloc")) for s in states.split()):
        pytest.skip(f"no Slurm node is up ({states.split()}); start it with `scripts/start-slurm.sh`")
    monkeypatch.setenv("REPROBOX_SBATCH_ARGS", "--cpus-per-task=1")
    run, runs = local_run(tmp_path)
    code, data = command(
        capsys,
        "spot-check",
        str(run),
        "--segments",
        "2",
        "--parallel",
        "2",
        "--runtime",
        "slurm",
        "--runs-dir",
        str(runs),
    )
    assert code == 0, data["sentence"]
    ids = set()
    for segment in data["segments"]:
        replay = read_record(segment["run_dir"])
        assert segment["match"] and replay.runtime_name == "slurm"
        ids.add(replay.runtime["slurm"]["job_id"])
    assert len(ids) == 2  # one Slurm job per segment
