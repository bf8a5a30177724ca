"""The first-divergence drill-down in the real image: replays in hardened containers, op logs read back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reprobox import cli

pytestmark = pytest.mark.integration

JOB = Path(__file__).parents[1] / "jobs" / "drill-down"


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch, offline_base: str, wheelhouse: Path) -> None:
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))


@pytest.mark.usefixtures("offline_env")
def test_verify_in_containers_names_the_planted_backward(tmp_path: Path, capsys) -> None:
    job = tmp_path / "job"
    shutil.copytree(JOB, job)
    (job / "job.yaml").write_text(
        (job / "job.yaml").read_text().replace("PLANT: forward-op", "PLANT: backward")
    )
    capsys.readouterr()
    code = cli.main(
        ["verify", str(job), "--runtime", "docker", "--runs-dir", str(tmp_path / "runs"), "--json", "-q"]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    op = data["first_divergence"]["operation"]
    line = next(
        i for i, text in enumerate((JOB / "train.py").read_text().splitlines(), 1) if "grad = grad +" in text
    )
    assert (op["module"], op["phase"], op["step"], op["source"]) == (
        "blocks.1.mlp",
        "backward",
        6,
        f"train.py:{line}",
    )
    replays = data["first_divergence"]["drill_down"]["replays"]
    assert all(
        json.loads((Path(r) / "manifest.json").read_text())["runtime"]["name"] == "docker" for r in replays
    )
