"""The first-divergence drill-down end to end on the local runtime: planted causes named right.

The job (tests/jobs/drill-down) trains a small two-block model; one env var plants one source of
difference. verify (and explain) must name the operation, module, phase, step and source line, or the
data cause, in text and JSON.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli
from reprobox.forensics.drilldown import analyze
from reprobox.runner import list_runs

JOB = Path(__file__).parents[1] / "jobs" / "drill-down"
SOURCE = (JOB / "train.py").read_text().splitlines()


def line_of(text: str) -> str:
    """train.py:N of the line holding `text`, so the tests follow edits of the job."""
    return f"train.py:{next(i for i, line in enumerate(SOURCE, 1) if text in line)}"


def planted(tmp_path: Path, plant: str, **env: str) -> Path:
    """A copy of the job with PLANT (and other variables) set in its job file."""
    job = tmp_path / f"job-{plant}"
    shutil.copytree(JOB, job)
    text = (job / "job.yaml").read_text().replace("PLANT: forward-op", f"PLANT: {plant}")
    extra = "".join(f'  {name}: "{value}"\n' for name, value in env.items())
    (job / "job.yaml").write_text(text + extra)
    return job


def verify(
    capsys: pytest.CaptureFixture[str], job: Path, runs: Path, *extra: str
) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    args = ["verify", str(job), "--runtime", "local", "--runs-dir", str(runs), "--parallel", "2"]
    code = cli.main([*args, "--json", "-q", *extra])
    return code, json.loads(capsys.readouterr().out)


def operation(data: dict[str, Any]) -> dict[str, Any]:
    assert data["verdict"] == "different", data.get("sentence")
    return data["first_divergence"]["operation"]


def test_nondeterministic_op_in_a_modules_forward(tmp_path: Path, capsys) -> None:
    """A trail every 4 steps: the drill-down brackets the exact step first, then records it."""
    runs = tmp_path / "runs"
    code, data = verify(capsys, planted(tmp_path, "forward-op"), runs, "--trail", "4", "--no-attestation")
    op = operation(data)
    assert code == 1
    first = data["first_divergence"]
    assert (first["previous_identical_step"], first["step"]) == (4, 8)  # what the runs' trails recorded
    assert first["drill_down"]["step"] == 6  # narrowed by the replays
    assert (op["name"], op["module"], op["phase"], op["step"], op["cause"]) == (
        "drilldown_test::jitter",
        "blocks.0.mlp",
        "forward",
        6,
        "operation",
    )
    assert op["source"] == line_of("return jitter(self.fc2(h))")
    assert op["inputs_equal"] is True
    assert op["outputs"][0]["differing_elements"] == 1 and op["outputs"][0]["elements"] == 256
    assert op["digests"]["a"]["inputs"] == op["digests"]["b"]["inputs"]
    assert op["digests"]["a"]["outputs"] != op["digests"]["b"]["outputs"]
    assert op["sentence"].startswith("nondeterministic operation `drilldown_test::jitter` in `blocks.0.mlp`")
    assert [row["diverges"] for row in op["context"]].count(True) == 1
    drill = data["first_divergence"]["drill_down"]
    assert drill["recorded_steps"] == [5, 6] and drill["reproduced_in_replay"] is True
    # replays are kept apart from the job's runs: `latest` and the run list stay the job's own
    assert len(list_runs(runs, "drill-down")) == 2
    assert all("/.drill-down/" in replay for replay in drill["replays"])
    # the replays hold their op logs: explaining them runs nothing, in text as in JSON
    capsys.readouterr()
    assert cli.main(["explain", *drill["replays"], "--runs-dir", str(runs)]) == 1
    text = capsys.readouterr().out
    assert "first diverging operation: nondeterministic operation `drilldown_test::jitter`" in text
    assert f"({line_of('return jitter(self.fc2(h))')}) during forward at step 6" in text
    assert len(list(runs.glob("drill-down/.drill-down/drill-down/2*"))) == 4  # 2 bracketing, 2 recording


def test_nondeterminism_in_a_custom_functions_backward(tmp_path: Path, capsys) -> None:
    _, data = verify(capsys, planted(tmp_path, "backward"), tmp_path / "runs")
    op = operation(data)
    assert (op["module"], op["phase"], op["step"]) == (
        "blocks.1.mlp",
        "backward",
        6,
    )  # backward: last block first
    assert op["source"] == line_of("grad = grad + entropy()")


@pytest.mark.parametrize(
    "loader", [{"WORKERS": "2"}, {"LOADER": "plain"}], ids=["dataloader-workers", "by-hand"]
)
def test_data_order_is_named_as_data(tmp_path: Path, capsys, loader: dict[str, str]) -> None:
    _, data = verify(capsys, planted(tmp_path, "data-order", **loader), tmp_path / "runs")
    op = operation(data)
    assert (op["cause"], op["step"]) == ("data", 5)
    assert op["sentence"].startswith("batch differs at step 5")
    if "WORKERS" in loader:
        # the workers' batches are known by their digests: the first op to read one is named
        assert (op["batch"], op["phase"], op["module"]) == (0, "forward", "embed")
    else:
        assert (op["phase"], op["name"]) == ("data", "aten::randperm.generator")


def test_a_reseeded_generator_is_named_as_rng(tmp_path: Path, capsys) -> None:
    _, data = verify(capsys, planted(tmp_path, "rng"), tmp_path / "runs")
    op = operation(data)
    assert (op["cause"], op["module"], op["phase"], op["step"]) == ("rng", "blocks.0.drop", "forward", 5)
    assert op["name"].startswith("aten::bernoulli_")


def test_explain_two_existing_runs_then_their_replays(tmp_path: Path, capsys) -> None:
    job, runs = planted(tmp_path, "backward"), tmp_path / "runs"
    for _ in range(2):
        assert cli.main(["run", str(job), "--runtime", "local", "--runs-dir", str(runs), "-q"]) == 0
    a, b = list_runs(runs, "drill-down")
    capsys.readouterr()
    assert cli.main(["explain", str(a), str(b), "--runs-dir", str(runs), "--json", "-q"]) == 1
    data = json.loads(capsys.readouterr().out)
    op = data["first_divergence"]["operation"]
    assert (op["module"], op["phase"], op["step"]) == ("blocks.1.mlp", "backward", 6)
    # the replays hold their op logs: explaining them needs no run, and the report shows the table
    replay_a, replay_b = data["first_divergence"]["drill_down"]["replays"]
    found, _ranks = analyze(Path(replay_a), Path(replay_b))
    assert found is not None and found["source"] == op["source"]
    page = tmp_path / "divergence.html"
    assert cli.main(["explain", replay_a, replay_b, "--html", str(page), "-q"]) == 1
    html = page.read_text()
    assert "First diverging operation:" in html and "Operations around the divergence" in html
    assert "aten::add.Tensor" in html
    capsys.readouterr()
    assert cli.main(["explain", str(a), str(a), "-q"]) == 0
    assert "nothing to explain: the runs are identical" in capsys.readouterr().out
    # a job file edited since the runs ran: refused (exit 2, one sentence) before any replay
    (job / "job.yaml").write_text((job / "job.yaml").read_text() + "# edited\n")
    replays = sorted(runs.glob("drill-down/.drill-down/drill-down/2*"))
    assert cli.main(["explain", str(a), str(b), "--runs-dir", str(runs), "-q"]) == 2
    err = capsys.readouterr().err
    assert "has changed since" in err and "Traceback" not in err
    assert sorted(runs.glob("drill-down/.drill-down/drill-down/2*")) == replays


def test_torchrun_names_the_rank_that_diverged_first(tmp_path: Path, capsys) -> None:
    """Rank 1 adds entropy to its predictions; rank 0 differs only once the gradients are all-reduced."""
    job = tmp_path / "ddp"
    shutil.copytree(JOB.parent / "vary-world-size", job)
    text = (job / "job.yaml").read_text()
    (job / "job.yaml").write_text(text + "env: {PLANT_RANK: '1'}\ntrail: {every: 1}\n")
    _, data = verify(capsys, job, tmp_path / "runs", "--no-attestation")
    op = operation(data)
    assert (op["rank"], op["step"], op["phase"], op["cause"]) == (1, 1, "forward", "input")
    source = (job / "train.py").read_text().splitlines()
    assert op["source"] == f"train.py:{next(i for i, s in enumerate(source, 1) if 'prediction + int' in s)}"
    assert op["sentence"].startswith("rank 1 diverged first:")
    ranks = data["first_divergence"]["drill_down"]["ranks"]
    assert set(ranks) == {"0", "1"} and "sent by another rank" in ranks["0"]
