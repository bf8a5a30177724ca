"""The documented Python API: every public name resolves, `import reprobox` stays light, and the API
alone takes a job from its file to a verdict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import reprobox

JOB = Path(__file__).parents[1] / "jobs" / "publish-small-npz" / "job.yaml"  # NumPy: the API is the point


def test_every_public_name_resolves() -> None:
    for name in reprobox.__all__:
        assert getattr(reprobox, name) is not None, name


def test_a_public_name_never_hides_a_submodule() -> None:
    from reprobox import verify  # the module, whatever was imported before

    assert hasattr(verify, "VerifyOptions")
    assert reprobox.verify_job is verify.verify


def test_importing_the_package_loads_nothing_heavy() -> None:
    heavy = "('yaml', 'torch', 'numpy', 'docker')"
    code = f"import sys, reprobox; print(sorted(m for m in {heavy} if m in sys.modules))"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "[]"


def test_the_api_takes_a_job_file_to_a_verdict(tmp_path: Path) -> None:
    spec = reprobox.load_job(JOB)
    runtime = reprobox.open_runtime("local", reprobox.RuntimeOptions(job=spec))
    comparison, records = reprobox.verify_job(
        spec, runtime, reprobox.RunOptions(runs_dir=tmp_path), reprobox.VerifyOptions(runs=2)
    )
    assert [r.status for r in records] == ["succeeded", "succeeded"]
    assert comparison.grade == "bit-identical", comparison.sentence
    again = reprobox.compare_runs([reprobox.read_record(r.run_dir) for r in records])
    assert again.grade == comparison.grade
