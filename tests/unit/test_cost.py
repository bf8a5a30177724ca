"""`reprobox cost`: which settings it measures, the block it recommends, and real runs on the local
runtime (a thread count it calls number-changing is one `verify --vary threads` calls sensitive)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli
from reprobox.cost._settings import candidate_settings, determinism_block
from reprobox.guest.determinism import Determinism
from reprobox.jobfile import load_job

JOBS = Path(__file__).parents[1] / "jobs"


def names(rows: list[Any]) -> list[str]:
    return [row.name for row in rows]


def test_settings_measured_on_a_cpu_and_on_a_gpu() -> None:
    own = Determinism()
    cpu = candidate_settings(own, threads_used=8, cpus=8, gpu=False)
    assert names(cpu) == [
        "default",
        "threads=1",
        "fill_uninitialized_memory=false",
        "onednn=false",
        "algorithms=false",
        "no determinism",
    ]
    gpu = candidate_settings(own, threads_used=8, cpus=8, gpu=True)
    assert set(names(gpu)) - set(names(cpu)) == {
        "cudnn_benchmark=true",
        "cublas_workspace_config=:16:8",
        "tf32=true",
        "sdpa_backends=[math]",
        "sdpa_backends=[flash, math]",
        "sdpa_backends=[efficient, math]",
    }
    unguaranteed = {row.name for row in gpu if not row.guaranteed}
    assert unguaranteed == {"cudnn_benchmark=true", "algorithms=false", "no determinism"}


def test_settings_follow_the_jobs_own() -> None:
    """A row changes something: a job pinned to one thread gets the many-core row, a job already on
    :16:8 and TF32 gets the other values, a job without deterministic algorithms has no such rows."""
    own = Determinism(threads=1, cublas_workspace_config=":16:8", tf32=True, algorithms=False)
    rows = names(candidate_settings(own, threads_used=1, cpus=4, gpu=True))
    assert "threads=4" in rows and "threads=1" not in rows
    assert "cublas_workspace_config=:4096:8" in rows and "tf32=false" in rows
    assert "algorithms=false" not in rows and "fill_uninitialized_memory=false" not in rows
    one_core = names(candidate_settings(Determinism(), threads_used=1, cpus=1, gpu=False))
    assert "threads=2" in one_core  # as `verify --vary threads` varies a one-thread job


@pytest.mark.parametrize(
    "det",
    [
        Determinism(threads=4),
        Determinism(threads=2, tf32=True, cublas_workspace_config=":16:8", sdpa_backends=("flash", "math")),
        Determinism(threads=1, fill_uninitialized_memory=False, onednn=False),
    ],
    ids=["threads", "gpu knobs", "cpu knobs"],
)
def test_the_recommended_block_is_a_valid_job_file_section(tmp_path: Path, det: Determinism) -> None:
    block = determinism_block(det)
    (tmp_path / "job.yaml").write_text(f"version: 1\nname: pasted\ncommand: [python, train.py]\n{block}\n")
    assert load_job(tmp_path / "job.yaml").determinism == det


def cost(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli.main(["cost", *args, "--json", "-q"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def test_cost_of_a_cpu_job_agrees_with_vary_threads(tmp_path: Path, capsys) -> None:
    """The thread rows' 'same numbers' is `verify --vary threads`' verdict on the same job."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: torch's own thread count is already 1, the row this test measures")
    runs = tmp_path / "runs"
    code, data = cost(
        capsys,
        str(JOBS / "vary-threads"),
        "--runtime",
        "local",
        "--runs-dir",
        str(runs),
        "--only",
        "threads=1",
    )
    assert code == 0
    rows = {row["name"]: row for row in data["settings"]}
    assert set(rows) == {"default", "threads=1"} and data["device"] == "cpu"
    for row in rows.values():
        assert row["bit_exact"] is True and row["step_seconds"] > 0 and row["relative_time"] >= 1.0
        assert row["steps_measured"] == 2 * 4  # two runs of five steps, the first of each not timed
        assert len(row["runs"]) == 2 and all(Path(run).is_dir() for run in row["runs"])
    assert min(row["relative_time"] for row in rows.values()) == 1.0
    recommended = data["recommended"]
    assert recommended["block"].startswith("determinism:\n  threads: ")
    assert recommended["name"] in rows
    # the runs are kept apart from the job's own: no `latest`, no run in the job's listing
    assert sorted(p.name for p in (runs / "vary-threads").iterdir()) == [".code", ".cost"]

    capsys.readouterr()
    vary_code = cli.main(
        [
            "verify",
            str(JOBS / "vary-threads"),
            *("--vary", "threads", "--runtime", "local", "--runs-dir", str(tmp_path / "vary")),
            *("--no-attestation", "--json", "-q"),
        ]
    )
    matrix = json.loads(capsys.readouterr().out)
    (threads_row,) = [row for row in matrix["factors"] if row["factor"] == "threads"]
    sensitive = threads_row["status"] == "sensitive"
    assert vary_code == (1 if sensitive else 0)
    assert rows["threads=1"]["same_numbers_as_default"] is (not sensitive)


def test_a_job_that_fails_under_its_own_settings_is_not_measured(tmp_path: Path, capsys) -> None:
    code = cli.main(["cost", str(JOBS / "exit-nonzero"), "--runtime", "local", "--runs-dir", str(tmp_path)])
    assert code == 3
    err = capsys.readouterr().err
    assert "the job failed under its own settings (exited with status 7)" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--max-steps", "2"), "--max-steps must be at least 3"),
        (("--only", "tf32=maybe"), "--only 'tf32=maybe' is not a setting"),
        (("--runs", "1"), "--runs must be from 2 to 10"),
        (("--trail", "3"), "cost records a hash trail on every step itself"),
    ],
)
def test_bad_arguments_are_refused_before_any_run(
    tmp_path: Path, capsys, args: tuple[str, ...], message: str
) -> None:
    runs = tmp_path / "runs"
    code = cli.main(
        ["cost", str(JOBS / "vary-threads"), "--runtime", "local", "--runs-dir", str(runs), *args]
    )
    assert code == 2
    assert message in capsys.readouterr().err
    assert not runs.exists()


def test_recommendation_combines_the_faster_bit_exact_knobs() -> None:
    """Of two faster thread counts the faster wins; an unguaranteed setting is never recommended however
    fast; noise within the runs' spread is no speed-up."""
    from reprobox.cost import _faster
    from reprobox.cost._model import SettingResult
    from reprobox.cost._settings import Setting

    def result(name: str, times: list[list[float]], *, guaranteed: bool = True) -> SettingResult:
        changed = SettingResult(Setting(name, {}, guaranteed=guaranteed), Determinism())
        changed.step_times, changed.bit_exact = times, True
        return changed

    default = result("default", [[1.0, 1.0], [1.0, 1.02]])
    assert _faster(result("tf32=true", [[0.5], [0.52]]), default)
    assert not _faster(result("noise", [[0.99], [0.98]]), default)
    assert not _faster(result("spread", [[0.5], [0.9]]), default)  # its own runs disagree by 57 %
    noisy_default = replace(default, step_times=[[1.0], [1.3]])
    assert not _faster(result("tf32=true", [[0.8], [0.8]]), noisy_default)
