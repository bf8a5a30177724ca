"""End to end on the local runtime: jobs that log to TensorBoard, MLflow and W&B as their quickstarts do.

Two runs of a deterministic job log the same numbers at other times, into files and folders named by the
time, host, pid and random run ids: the verdict is ``reproduced``, the clocks listed as run-specific.
The same job with os.urandom noise in the loss it logs at step 3 is ``not reproducible``, and the verdict
names that tag and step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli

pytestmark = pytest.mark.slow  # two local runs per test, each importing the logging library

JOBS = Path(__file__).parents[1] / "jobs"

# tool -> (a clock each run stamps differently, the name of the loss logged at step 3)
TOOLS = {
    "tensorboard": ("Loss/train.step_3.wall_time", "Loss/train.step_3"),
    "mlflow": ("loss.step_3.timestamp", "loss.step_3"),
    "wandb": ("step_3._timestamp", "loss.step_3"),
}


def verify(job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli.main(
        [
            "verify",
            str(job),
            *("--runtime", "local", "--runs-dir", str(tmp_path / "runs")),
            *("--attestation", str(tmp_path / "reprobox.attestation.json"), "--json", "-q"),
        ]
    )
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, data


def explained(data: dict[str, Any]) -> str:
    return json.dumps({k: data.get(k) for k in ("sentence", "value_differences", "notes")}, indent=1)


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_logged_numbers_reproduce_and_their_clocks_are_run_specific(
    tool: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip(tool)
    code, data = verify(JOBS / f"logs-{tool}", tmp_path, capsys)
    assert data["grade"] == "reproduced", explained(data)
    assert code == 0
    clock, _ = TOOLS[tool]
    excused = {e["name"]: e["reason"] for e in data["run_specific"]}
    assert excused.get(clock) == "a wall-clock timestamp", sorted(excused)
    assert not data["value_differences"]


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_noisy_logged_loss_is_named_by_its_tag_and_step(
    tool: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip(tool)
    code, data = verify(JOBS / f"logs-{tool}" / "noisy.yaml", tmp_path, capsys)
    assert (code, data["grade"]) == (1, "not reproducible")
    _, loss = TOOLS[tool]
    assert [e["name"] for e in data["value_differences"]] == [loss], explained(data)
    assert loss in data["sentence"]


def test_a_hydra_run_folder_is_paired_by_its_date_and_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hydra's outputs/<date>/<time>/ differs in every run: its files are paired, and the folder's time
    inside its own config (hydra.runtime.output_dir) and the log's clock are run-specific. Each run starts
    once the clock's second has turned, so the folders' times differ for certain."""
    pytest.importorskip("hydra")
    code, data = verify(JOBS / "logs-hydra" / "seconds-apart.yaml", tmp_path, capsys)
    assert (code, data["grade"]) == (0, "reproduced"), explained(data)
    [[first], [second]] = [list(Path(run, "outputs").glob("outputs/*/*/model.npz")) for run in data["runs"]]
    assert first.parent.name != second.parent.name  # outputs/<date>/<time>/: the times differ
    excused = {(e["checkpoint"].rsplit("/", 1)[-1], e["name"]): e["reason"] for e in data["run_specific"]}
    assert excused[("model.npz", "<file>")] == "file name: a wall-clock timestamp"
    assert "a run id or time in the file's own path" in excused[("hydra.yaml", "hydra.runtime.output_dir")]
    assert not data["value_differences"]
    assert (tmp_path / "reprobox.attestation.json").is_file()


def test_a_noisy_loss_in_hydras_log_is_named_by_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("hydra")
    code, data = verify(JOBS / "logs-hydra" / "noisy.yaml", tmp_path, capsys)
    assert (code, data["grade"]) == (1, "not reproducible")
    [difference] = data["value_differences"]
    assert difference["checkpoint"].endswith("/train.log") and difference["name"] == "line 4"
    assert "step 3 loss" in difference["a"] and difference["a"] != difference["b"]
    assert not (tmp_path / "reprobox.attestation.json").exists()
