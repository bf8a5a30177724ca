"""A verdict claims no more than was compared, and reads the way a user reads it.

Each test writes two runs' outputs without torch (NumPy files and pickles hold the tensors), hashes them
with the guest's real hashing, and compares the records: no verdict when every file that holds tensors
was ignored or could not be read, a values-only job told as one, one row per file saying what was found
in it, run-specific values grouped by kind, and `hash` saying what its content digest covers.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reprobox import cli, compare
from reprobox.compare._summary import run_specific_groups, series_name
from reprobox.guest.hashing import hash_outputs
from reprobox.records.manifest import RunRecord, read_record, write_record
from reprobox.render import terminal
from reprobox.render.document import gather
from reprobox.render.markdown import markdown

Writer = Callable[[Path, int], None]
RUN_IDS = ("20261123T120000Z-aaaaaa", "20261123T120105Z-bbbbbb")


def make_runs(root: Path, write: Writer, job: dict[str, Any] | None = None) -> list[Path]:
    """Two run directories with their records, as `verify` leaves them."""
    runs = []
    for index, run_id in enumerate(RUN_IDS):
        run_dir = root / "runs" / "job" / run_id
        outputs = run_dir / "outputs"
        outputs.mkdir(parents=True)
        write(outputs, index)
        write_record(
            run_dir,
            {
                "run_id": run_id,
                "job_name": "job",
                "status": "succeeded",
                "job": job or {},
                "fingerprint": {"hardware": {"hostname": "node1"}},
                "checkpoints": [d.to_json() for d in hash_outputs(outputs, [])],
            },
        )
        runs.append(run_dir)
    return runs


def records(root: Path, write: Writer, job: dict[str, Any] | None = None) -> list[RunRecord]:
    return [read_record(run) for run in make_runs(root, write, job)]


def two_runs(root: Path, write: Writer, job: dict[str, Any] | None = None) -> compare.Comparison:
    return compare.compare_runs(records(root, write, job))


def weights(out: Path, name: str = "model.npz") -> None:
    np.savez(out / name, w=np.arange(6, dtype=np.float32), b=np.zeros(2, dtype=np.float32))


def config(out: Path) -> None:
    (out / "config.json").write_text(json.dumps({"lr": 0.1, "epochs": 3}))


def stamped_checkpoint(out: Path, run: int) -> None:
    """A model in a format no reader takes apart (nor reads as text), stamped with the run at byte 7."""
    (out / "model.ckpt").write_bytes(b"\x80\xffMODEL" + bytes([run]) + bytes(32))


IGNORE_MODEL = {"compare": {"ignore": [{"file": "model.npz", "key": None}]}}


# -- no verdict over nothing ---------------------------------------------------------------------------


@pytest.mark.parametrize("model_differs", [False, True])
def test_every_file_holding_tensors_ignored_leaves_no_verdict(tmp_path: Path, model_differs: bool) -> None:
    def write(out: Path, run: int) -> None:
        np.savez(out / "model.npz", w=np.full(3, float(run if model_differs else 0)))
        config(out)

    result = two_runs(tmp_path, write, IGNORE_MODEL)
    assert (result.verdict, result.grade) == (compare.FAILED, compare.NO_VERDICT)
    assert result.sentence.startswith("no verdict: no tensor was compared: every file that holds tensors")
    assert "model.npz (rule 'model.npz')" in result.sentence
    assert "only 2 values in 1 file were compared" in result.sentence
    assert "take the model out of compare: ignore" in result.sentence
    assert "every tensor and value is equal" not in result.sentence
    data = result.to_json()
    compared = data["compared"]
    assert (compared["tensors"], compared["values"], compared["files"]) == (0, 2, 1)
    assert compared["ignored_tensor_files"] == [{"file": "model.npz", "rule": "model.npz"}]
    if model_differs:  # an ignored file that differs is listed; one whose bytes are equal proves nothing
        assert data["ignored_summary"] == [
            {
                "rule": "model.npz",
                "count": 1,
                "files": ["model.npz"],
                "text": "1 file by the rule 'model.npz'",
            }
        ]


def test_an_unreadable_model_leaves_no_verdict_and_is_never_advised_away(tmp_path: Path, capsys) -> None:
    def write(out: Path, run: int) -> None:
        stamped_checkpoint(out, run)
        config(out)

    runs = make_runs(tmp_path, write)
    assert cli.main(["compare", *map(str, runs), "--json"]) == 3
    data = json.loads(capsys.readouterr().out)
    assert (data["verdict"], data["grade"]) == ("failed", "no verdict")
    sentence = data["sentence"]
    assert sentence.startswith(
        "no verdict: no tensor was compared: every file that holds tensors is in a format"
    )
    assert "model.ckpt (binary data, first difference at byte 7" in sentence
    assert "save the weights in a format reprobox reads" in sentence
    assert "compare: ignore" not in sentence and "every tensor and value" not in sentence
    assert data["compared"]["unreadable_tensor_files"] == ["model.ckpt"]


def test_beside_a_compared_model_an_unreadable_plot_may_be_ignored_but_a_checkpoint_may_not(
    tmp_path: Path,
) -> None:
    def write(out: Path, run: int) -> None:
        weights(out)
        (out / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + f"tIME {run}".encode())

    plot = two_runs(tmp_path / "plot", write)
    assert plot.grade == compare.NO_VERDICT
    assert plot.sentence.startswith("no verdict: every tensor and value is equal, but 1 file differs")
    assert "list it under compare: ignore to accept it" in plot.sentence

    def write_checkpoint(out: Path, run: int) -> None:
        weights(out)
        stamped_checkpoint(out, run)

    checkpoint = two_runs(tmp_path / "checkpoint", write_checkpoint)
    assert checkpoint.grade == compare.NO_VERDICT
    assert "model.ckpt may hold the model, which a verdict must compare" in checkpoint.sentence
    assert "compare: ignore" not in checkpoint.sentence


def test_a_values_only_job_is_judged_on_its_values_and_says_so(tmp_path: Path) -> None:
    """A tokenizer trainer or an evaluation writes values and no tensors: its verdict counts them."""

    def write(out: Path, run: int) -> None:
        (out / "tokenizer.json").write_text(json.dumps({"vocab": {"a": 0, "b": 1}, "merges": ["a b"]}))
        (out / "metrics.json").write_text(json.dumps({"accuracy": 0.75, "train_runtime": [3.1, 3.4][run]}))

    result = two_runs(tmp_path / "excused", write)
    assert (result.verdict, result.grade) == (compare.IDENTICAL, compare.REPRODUCED)
    assert result.sentence == (
        "reproduced: every value is equal across 2 runs (5 values in 2 files; no tensors), "
        "except 1 run-specific value (listed)"
    )

    same = two_runs(tmp_path / "same", lambda out, _run: config(out))
    assert same.sentence == (
        "bit-identical: every output file is byte for byte the same across 2 runs "
        "(2 values in 1 file; no tensors)"
    )

    def differs(out: Path, run: int) -> None:
        (out / "metrics.json").write_text(json.dumps({"accuracy": [0.75, 0.76][run]}))

    assert two_runs(tmp_path / "differs", differs).grade == compare.NOT_REPRODUCIBLE


def test_a_compared_model_keeps_the_tensor_sentence(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        weights(out)
        (out / "metrics.json").write_text(json.dumps({"train_runtime": [3.1, 3.4][run]}))

    result = two_runs(tmp_path, write)
    assert result.sentence.startswith("reproduced: every tensor and value is equal across 2 runs, except")
    compared = result.to_json()["compared"]
    assert (compared["tensors"], compared["tensor_files"]) == (2, ["model.npz"])
    assert compared["text"] == "2 tensors and 1 value in 2 files"


# -- the verdict as a user reads it --------------------------------------------------------------------


def test_a_file_with_equal_tensors_and_a_differing_value_is_not_shown_same(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        state = {"w": np.arange(4, dtype=np.float32), "val_acc": [0.912, 0.934][run]}
        (out / "ckpt.pkl").write_bytes(pickle.dumps(state))
        (out / "metrics.json").write_text(json.dumps({"epoch_time": [3.1, 3.4][run], "epochs": 3}))

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE
    rows = {row["path"]: row for row in result.checkpoints}
    assert (rows["ckpt.pkl"]["status"], rows["ckpt.pkl"]["identical"]) == ("differs", False)
    assert (rows["metrics.json"]["status"], rows["metrics.json"]["identical"]) == ("run-specific", True)
    text = terminal.comparison_text(result)
    assert "[DIFF]" in _line(text, "ckpt.pkl  ") and "[same]" not in text
    assert "[run-specific]" in _line(text, "metrics.json  ")
    report = markdown(gather(records(tmp_path / "again", write)), None)
    assert "| **ckpt.pkl** | DIFFERS |" in report
    assert "| metrics.json | equal but run-specific values |" in report


def test_files_paired_by_a_run_specific_name_are_one_row(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        weights(out)
        folder = out / "runs" / f"Nov2{run}_12-00-0{run}_node1"
        folder.mkdir(parents=True)
        (folder / "log.json").write_text(json.dumps({"loss": 0.5}))

    result = two_runs(tmp_path, write)
    assert result.grade == compare.REPRODUCED, result.sentence
    (row,) = [row for row in result.checkpoints if row["path"].endswith("log.json")]
    assert [cell["path"] for cell in row["runs"]] == [
        "runs/Nov20_12-00-00_node1/log.json",
        "runs/Nov21_12-00-01_node1/log.json",
    ]
    assert (row["status"], row["identical"]) == ("same", True)
    assert len(result.checkpoints) == 2
    line = _line(terminal.comparison_text(result), "log.json")
    assert line.startswith("  [same]") and "(also named runs/Nov21_12-00-01_node1/log.json)" in line


def test_run_specific_values_are_grouped_by_kind_with_counts(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        weights(out)
        history = [
            {
                "step": step,
                "loss": 1 / (step + 1),
                "train_runtime": step + run * 0.5,
                "output_dir": f"{out}/c{step}",
            }
            for step in range(30)
        ]
        (out / "trainer_state.json").write_text(json.dumps({"log_history": history}))

    result = two_runs(tmp_path, write)
    assert result.grade == compare.REPRODUCED, result.sentence
    assert len(result.run_specific) == 60  # every value still listed one by one
    summary = result.to_json()["run_specific_summary"]
    assert [(g["kind"], g["count"], g["names"]) for g in summary] == [
        ("duration or throughput figures", 30, ["log_history.*.train_runtime"]),
        ("paths under the run's own folders", 30, ["log_history.*.output_dir"]),
    ]
    text = summary[0]["text"]  # ", judged by name" where the value's name is its evidence
    assert text.startswith("30 duration or throughput figures in trainer_state.json")
    assert text.endswith(": log_history.*.train_runtime")
    lines = [line for line in terminal.comparison_text(result).splitlines() if "run-specific:" in line]
    assert len(lines) == 2 and lines[0].startswith(f"  run-specific: {summary[0]['text']}  (e.g. ")
    report = markdown(gather(records(tmp_path / "again", write)), None)
    section = report.split("## Run-specific values (not counted against the verdict)")[1]
    assert f"- {summary[0]['text']}" in section
    assert "<details><summary>every one of the 60 values</summary>" in section


def test_a_series_that_differs_at_every_step_is_one_line_naming_its_count(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        weights(out)
        rows = "".join(f"{step},{0.5 / (step + 1)},{step * 10 + run}\n" for step in range(12))
        (out / "metrics.csv").write_text("step,loss,score\n" + rows)
        (out / "final.json").write_text(json.dumps({"best": [1, 2][run]}))

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE and len(result.value_differences) == 13
    lines = [line for line in terminal.comparison_text(result).splitlines() if "value differs:" in line]
    assert lines == [
        "  value differs: final.json  best  1 vs 2",
        "  value differs: metrics.csv  *.score: 12 values (first 0.score  '0' vs '1')",
    ]


def test_groups_name_each_kind_and_fold_step_numbers() -> None:
    entries = [
        {
            "checkpoint": "ev1",
            "name": f"charts/SPS.step_{n}",
            "a": 21.0,
            "b": 24.0,
            "reason": "a rate (judged by its name)",
        }
        for n in range(4)
    ]
    entries += [
        {
            "checkpoint": f"ev{n % 2}",
            "name": f"losses/loss.step_{n}.wall_time",
            "reason": "a wall-clock timestamp",
        }
        for n in range(121)
    ]
    entries.append(
        {
            "checkpoint": "x",
            "name": "<file>",
            "a": "x",
            "b": "y",
            "reason": "file name: a process id and the host name",
        }
    )
    entries.append({"checkpoint": "m.pt", "name": "repr", "reason": "a memory address"})
    entries.append(
        {
            "checkpoint": "mlruns/1/meta.yaml",
            "name": "<file>",
            "a": "mlruns/1/meta.yaml",
            "b": "mlruns/2/meta.yaml",
            "reason": "file name: a run-specific folder name (what lies under it pairs file for file)",
        }
    )
    entries.append(
        {"checkpoint": "m.pt", "name": "note", "reason": "a process id and a wall-clock timestamp"}
    )
    texts = [group["text"] for group in run_specific_groups(entries)]
    assert texts == [
        "121 wall-clock stamps in 2 files: losses/loss.*.wall_time",
        "4 duration or throughput figures in ev1, judged by name: charts/SPS",
        "1 file name differing only by process ids and host names: x",
        "1 file name differing only by run-specific folder names: mlruns/1/meta.yaml",
        "1 memory address in m.pt: repr",
        "1 value holding process ids and wall-clock stamps in m.pt: note",
    ]
    assert series_name("charts/SPS.step_1024") == "charts/SPS"
    assert series_name("12.val_loss") == "*.val_loss"
    assert series_name("epoch") == "epoch"


# -- what hash's content digest covers ------------------------------------------------------------------


def test_hash_says_what_its_content_digest_covers(tmp_path: Path, capsys) -> None:
    weights(tmp_path)
    config(tmp_path)
    (tmp_path / "ckpt.pkl").write_bytes(pickle.dumps({"w": np.ones(2, dtype=np.float32), "step": 3}))
    (tmp_path / "notes.txt").write_text("done\n")
    files = [tmp_path / name for name in ("model.npz", "config.json", "ckpt.pkl", "notes.txt")]
    assert cli.main(["hash", *map(str, files), "--json"]) == 0
    covers = {Path(k).name: v["covers"] for k, v in json.loads(capsys.readouterr().out)["files"].items()}
    assert {name: c["what"] for name, c in covers.items()} == {
        "model.npz": "tensors",
        "config.json": "values",
        "ckpt.pkl": "tensors",
        "notes.txt": "bytes",
    }
    assert covers["ckpt.pkl"]["text"].endswith("not its values, digested apart")
    assert cli.main(["hash", str(files[1]), str(files[3])]) == 0
    text = capsys.readouterr().out
    assert "  covers   2 values, each by its dotted name; the file holds no tensors" in text
    assert (
        "  covers   the file's bytes (the digest is its sha256): not a format read as tensors or values"
        in text
    )


def _line(text: str, fragment: str) -> str:
    """The checkpoint row that names this file."""
    (line,) = [line for line in text.splitlines() if line.startswith("  [") and fragment in line]
    return line


def test_a_file_found_under_another_name_is_one_row_that_differs(tmp_path: Path) -> None:
    result = two_runs(tmp_path, lambda out, run: weights(out, f"model-{['1f3a', '9c2e'][run]}.npz"))
    assert result.grade == compare.NOT_REPRODUCIBLE
    (row,) = result.checkpoints
    assert (row["path"], row["status"], row["identical"]) == ("model-1f3a.npz", "differs", False)
    assert [cell["path"] for cell in row["runs"]] == ["model-1f3a.npz", "model-9c2e.npz"]
    assert _line(terminal.comparison_text(result), "model-1f3a.npz").startswith(
        "  [DIFF] model-1f3a.npz  (also"
    )


def test_records_that_do_not_say_how_files_were_read_claim_nothing_about_what_they_hold(
    tmp_path: Path,
) -> None:
    """Older records name no format: the verdict keeps its plain sentence and counts nothing."""
    runs = []
    for run_id in RUN_IDS:
        run_dir = tmp_path / run_id
        (run_dir / "outputs").mkdir(parents=True)
        entry = {"path": "model.bin", "file_sha256": "a" * 64, "content_sha256": "b" * 64}
        runs.append(RunRecord(run_dir, {"run_id": run_id, "status": "succeeded", "checkpoints": [entry]}))
    result = compare.compare_runs(runs)
    assert result.sentence == "bit-identical: every output file is byte for byte the same across 2 runs"
    assert "compared" not in result.to_json()


def test_a_sentence_claims_tensors_only_where_tensors_were_compared(tmp_path: Path) -> None:
    """Every tensor of the model left out by name (the file itself compared): the values were compared,
    no tensor was, and the sentence counts what was rather than speaking of tensors."""
    job = {"compare": {"ignore": [{"file": "model.npz", "key": "*"}]}}

    def write(out: Path, run: int) -> None:
        weights(out)
        (out / "metrics.json").write_text(json.dumps({"train_runtime": [3.1, 3.4][run], "epochs": 3}))

    result = two_runs(tmp_path, write, job)
    assert result.to_json()["compared"]["tensors"] == 0
    assert "every tensor" not in result.sentence, result.sentence
    assert result.sentence.startswith(
        "reproduced: every value is equal across 2 runs (0 tensors and 2 values"
    )


def test_differing_tensors_lead_the_sentence_before_paths_and_names(tmp_path: Path) -> None:
    """Lightning's Trainer(max_time=...): the weights really differ, and so does best_model_path."""

    def write(out: Path, run: int) -> None:
        np.savez(out / "model.npz", w=np.arange(6, dtype=np.float32) * (1 + run))
        best = f"/ckpt/epoch={15 + run}-step={491 + 30 * run}.ckpt"
        (out / "state.json").write_text(json.dumps({"best_model_path": best}))

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert result.sentence.startswith("not reproducible: 1 tensor differs (first: w in model.npz)"), (
        result.sentence
    )
    assert "1 value too (first: best_model_path in state.json)" in result.sentence
