"""Divergence forensics end to end on the local runtime: trails, first divergence, early verdicts, audit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reprobox import cli
from reprobox.records.manifest import read_record
from reprobox.runner import list_runs

JOBS = Path(__file__).parents[1] / "jobs"
DIVERGE = JOBS / "diverge-at-step"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    capsys.readouterr()  # drop what fixtures printed
    code = cli.main([*args, "--json", "-q"])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def diverged_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    runs = tmp_path_factory.mktemp("runs")
    assert (
        cli.main(["run", str(DIVERGE), "--runtime", "local", "--trail", "1", "--runs-dir", str(runs), "-q"])
        == 0
    )
    assert (
        cli.main(["run", str(DIVERGE), "--runtime", "local", "--trail", "1", "--runs-dir", str(runs), "-q"])
        == 0
    )
    first, second = list_runs(runs, "diverge-at-step")
    return first, second


def test_compare_names_the_step_and_parameter(diverged_pair: tuple[Path, Path], capsys) -> None:
    code, data = run_json(capsys, "compare", *map(str, diverged_pair))
    assert code == 1
    assert data["first_divergence"]["step"] == 20
    assert data["first_divergence"]["parameters"] == ["head.weight"]
    assert data["first_divergence"]["previous_identical_step"] == 19
    losses = data["first_divergence"]["loss"]
    assert [s for s, _ in losses["a"]] == list(range(15, 26))  # recorded automatically from backward()
    assert data["explanation"]["same_stack"]
    assert data["explanation"]["sentence"].startswith("same stack, different result: a real nondeterminism")


def test_trail_records_every_step_from_one(diverged_pair: tuple[Path, Path]) -> None:
    lines = (diverged_pair[0] / "trail.jsonl").read_text().splitlines()
    steps = [json.loads(line)["step"] for line in lines[1:]]
    assert steps == list(range(1, 61))
    assert set(json.loads(lines[1])["params"]) == {"body.weight", "body.bias", "head.weight", "head.bias"}


def test_verify_reports_the_first_divergence(tmp_path: Path, capsys) -> None:
    capsys.readouterr()
    code = cli.main(
        ["verify", str(DIVERGE), "--runtime", "local", "--trail", "5", "--runs-dir", str(tmp_path), "--json"]
    )
    out, err = capsys.readouterr()
    data = json.loads(out)  # stdout holds the one object, nothing said early
    assert code == 1 and data["verdict"] == "different"
    # the verdict is said on stderr as soon as it is known, before the drill-down's replays run
    said = err.splitlines()
    drill = next(i for i, line in enumerate(said) if line.startswith("reprobox: drill-down: replaying"))
    assert said.index(data["sentence"]) < drill
    assert data["first_divergence"]["step"] == 20  # a multiple of 5: the first recorded step that differs
    assert data["first_divergence"]["parameters"] == ["head.weight"]
    # the drill-down replays to step 20 and names the line that nudged the gradient
    op = data["first_divergence"]["operation"]
    assert (op["step"], op["cause"], op["phase"], op["source"]) == (20, "input", "backward", "train.py:31")
    assert op["name"].startswith("aten::add_") and op["input"]["tag"] is None
    assert "a Python value computed outside torch" in op["explanation"]


def test_stop_on_divergence_stops_at_that_step(tmp_path: Path, capsys) -> None:
    code, data = run_json(
        capsys,
        "verify",
        str(DIVERGE),
        "--runtime",
        "local",
        "--stop-on-divergence",
        "--no-drill-down",
        "--runs-dir",
        str(tmp_path),
    )
    assert code == 1 and data["verdict"] == "different"
    assert data["first_divergence"]["step"] == 20
    assert data["first_divergence"]["parameters"] == ["head.weight"]
    reference, rerun = (read_record(run) for run in data["runs"])
    assert rerun.data["stopped_early"]["reason"] == "diverged"
    assert rerun.data["stopped_early"]["step"] == 20
    assert reference.status in ("cancelled", "succeeded")
    rerun_steps = [
        json.loads(line).get("step") for line in (rerun.run_dir / "trail.jsonl").read_text().splitlines()
    ]
    assert max(s for s in rerun_steps if s) == 20  # it did not train past the divergence


def test_max_steps_is_a_prefix_check(tmp_path: Path, capsys) -> None:
    code, data = run_json(
        capsys, "verify", str(DIVERGE), "--runtime", "local", "--max-steps", "10", "--runs-dir", str(tmp_path)
    )
    assert code == 0 and data["verdict"] == "identical", data.get("first_divergence") or data["notes"]
    assert any("first 10 optimizer steps are bit-identical" in note for note in data["notes"])
    record = read_record(data["runs"][0])
    assert record.data["prefix_check"] == {"max_steps": 10, "reached": True}
    assert record.checkpoints == []  # the job ended cleanly at step 10, before saving


def test_max_steps_past_the_divergence_is_different(tmp_path: Path, capsys) -> None:
    code, data = run_json(
        capsys,
        *("verify", str(DIVERGE), "--runtime", "local", "--max-steps", "25", "--no-drill-down"),
        *("--runs-dir", str(tmp_path)),
    )
    assert code == 1 and data["first_divergence"]["step"] == 20, data["first_divergence"]


def test_trail_log_adds_scalars(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.yaml").write_text("version: 1\nname: logs\ncommand: [python, train.py]\ntrail: {every: 2}\n")
    (job / "train.py").write_text(
        "import torch, reprobox\n"
        "w = torch.nn.Parameter(torch.ones(3))\n"
        "opt = torch.optim.SGD([w], lr=0.1)\n"
        "for step in range(1, 5):\n"
        "    opt.zero_grad(); (w * w).sum().backward(); opt.step()\n"
        "    reprobox.trail.log(step, accuracy=step / 10)\n"
    )
    runs = tmp_path / "runs"
    assert cli.main(["run", str(job), "--runtime", "local", "--runs-dir", str(runs), "-q"]) == 0
    from reprobox.records.trail import read_trail

    (run_dir,) = list_runs(runs, "logs")
    trail = read_trail(run_dir / "trail.jsonl")
    assert sorted(trail.steps) == [2, 4]
    assert trail.steps[2].params.keys() == {"param.0"}  # not held by any nn.Module
    assert trail.scalars[1] == {"accuracy": 0.1}
    assert trail.scalars[4]["accuracy"] == 0.4 and trail.scalars[4]["loss"] > 0


def test_audit_points_at_the_users_lines(tmp_path: Path, capsys) -> None:
    job = JOBS / "audit-runtime"
    code, data = run_json(capsys, "audit", str(job), "--runtime", "local", "--runs-dir", str(tmp_path))
    assert code == 1
    planted = {
        int(number)
        for number, line in enumerate((job / "train.py").read_text().splitlines(), start=1)
        if re.search(r"# audit: ", line)
    }
    found = {(Path(r["file"]).name, r["line"]) for r in data["runtime"]}
    assert found == {("train.py", line) for line in planted}
    assert data["static"] == [] or all(f["rule"] in ("put", "max-unpool") for f in data["static"])


def test_audit_is_quiet_on_the_clean_job(tmp_path: Path, capsys) -> None:
    code, data = run_json(
        capsys, "audit", str(JOBS / "clean"), "--runtime", "local", "--runs-dir", str(tmp_path)
    )
    assert code == 0 and data["status"] == "clean"
    assert data["static"] == [] and data["runtime"] == []


def test_audit_on_the_example_notes_what_reprobox_covers(tmp_path: Path, capsys) -> None:
    example = Path(__file__).parents[2] / "examples" / "tiny-mlp"
    code, data = run_json(capsys, "audit", str(example), "--static-only")
    assert code == 0 and data["status"] == "clean"
    assert {f["rule"] for f in data["static"]} == {"set-iteration-order", "dataloader-unseeded-workers"}
    assert all(f["covered_by_reprobox"] for f in data["static"])
    code, data = run_json(capsys, "audit", str(example), "--static-only", "--strict")
    assert code == 1
