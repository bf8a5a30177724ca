"""Graded verdicts on outputs shaped like real trainers' (HF Trainer, Lightning, timm, minGPT).

Each test writes two runs' output files, hashes them with the guest's real hashing, and compares the
records: run-specific values are listed and excused, every other difference is named with both values.
Run A ran from 12:00:00 to 12:00:59 UTC on 2026-11-23 and run B the minute after, as their records say:
a stamp is a reading of a run's clock only inside that run's own window.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import torch

from reprobox import compare
from reprobox.guest.hashing import hash_outputs
from reprobox.records.manifest import RunRecord
from reprobox.render import terminal
from reprobox.runspecific import (
    DURATION_BY_NAME,
    PAIRED_FOLDER,
    RunContext,
    Window,
    classify_value,
    mask,
    reason_by_key,
)

Writer = Callable[[Path], None]


WINDOWS = {
    "a": ("2026-11-23T12:00:00.000+00:00", "2026-11-23T12:00:59.000+00:00"),
    "b": ("2026-11-23T12:01:00.000+00:00", "2026-11-23T12:01:59.000+00:00"),
}


def make_run(
    root: Path,
    run_id: str,
    write: Writer,
    *,
    host: str = "node1",
    job: dict[str, Any] | None = None,
    window: tuple[str, str] = WINDOWS["a"],
    facts: dict[str, Any] | None = None,
) -> RunRecord:
    run_dir = root / "runs" / "job" / run_id
    outputs = run_dir / "outputs"
    outputs.mkdir(parents=True)
    write(outputs)
    data = {
        "run_id": run_id,
        "status": "succeeded",
        "job": job or {},
        "started_at": window[0],
        "ended_at": window[1],
        "fingerprint": {"hardware": {"hostname": host}},
        "checkpoints": [d.to_json() for d in hash_outputs(outputs, [])],
        "run_facts": facts or {},
    }
    return RunRecord(run_dir.resolve(), data)


def two_runs(tmp_path: Path, write: Callable[[Path, int], None], **kwargs: Any) -> compare.Comparison:
    facts = kwargs.pop("facts", ({}, {}))
    a = make_run(tmp_path, "20261123T120000Z-aaaaaa", lambda out: write(out, 0), facts=facts[0], **kwargs)
    b = make_run(
        tmp_path,
        "20261123T120105Z-bbbbbb",
        lambda out: write(out, 1),
        window=WINDOWS["b"],
        facts=facts[1],
        **kwargs,
    )
    return compare.compare_runs([a, b])


def weights() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {"fc.weight": torch.randn(4, 4, generator=generator), "fc.bias": torch.zeros(4)}


def test_equal_files_are_bit_identical(tmp_path: Path) -> None:
    result = two_runs(tmp_path, lambda out, _i: torch.save(weights(), out / "model.pt"))
    assert (result.verdict, result.grade) == (compare.IDENTICAL, compare.BIT_IDENTICAL)
    assert result.sentence.startswith("bit-identical")


def test_a_changed_metric_beside_equal_weights_is_not_reproducible(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        torch.save({"model": weights(), "val_acc": [0.912, 0.934][run]}, out / "ckpt.pt")

    result = two_runs(tmp_path, write)
    assert (result.verdict, result.grade) == (compare.DIFFERENT, compare.NOT_REPRODUCIBLE)
    assert result.value_differences == [{"checkpoint": "ckpt.pt", "name": "val_acc", "a": 0.912, "b": 0.934}]
    assert "val_acc 0.912 vs 0.934 in ckpt.pt" in result.sentence
    assert "val_acc" in terminal.comparison_text(result)


def test_trainer_state_durations_are_run_specific_and_losses_are_not(tmp_path: Path) -> None:
    def state(runtime: float, loss: float) -> dict[str, Any]:
        return {
            "global_step": 30,
            "log_history": [
                {"loss": loss, "step": 10},
                {"train_runtime": runtime, "train_samples_per_second": 100 / runtime, "step": 30},
            ],
        }

    same_loss = two_runs(
        tmp_path / "same",
        lambda out, run: (out / "trainer_state.json").write_text(json.dumps(state([3.2, 3.9][run], 2.5))),
    )
    assert (same_loss.verdict, same_loss.grade) == (compare.IDENTICAL, compare.REPRODUCED)
    assert {e["name"] for e in same_loss.run_specific} == {
        "log_history.1.train_runtime",
        "log_history.1.train_samples_per_second",
    }
    assert all(e["reason"] == DURATION_BY_NAME for e in same_loss.run_specific)  # no record of the clock

    other_loss = two_runs(
        tmp_path / "other",
        lambda out, run: (out / "trainer_state.json").write_text(json.dumps(state(3.2, [2.5, 2.6][run]))),
    )
    assert other_loss.grade == compare.NOT_REPRODUCIBLE
    assert [(e["name"], e["a"], e["b"]) for e in other_loss.value_differences] == [
        ("log_history.0.loss", 2.5, 2.6)
    ]


def test_saved_arguments_holding_the_runs_own_paths_reproduce(tmp_path: Path) -> None:
    """timm's checkpoint saver pickles its argparse Namespace, output folder included."""

    def write(out: Path, _run: int) -> None:
        args = {"output": str(out), "lr": 0.1, "logging_dir": f"{out}/runs/Nov23_12-0{_run}-01_node1"}
        torch.save({"state_dict": weights(), "args": args, "epoch": 3}, out / "checkpoint-0.pth")

    result = two_runs(tmp_path, write)
    assert (result.verdict, result.grade) == (compare.IDENTICAL, compare.REPRODUCED)
    reasons = {e["name"]: e["reason"] for e in result.run_specific}
    assert reasons["args.output"] == "a path under the run's own directory"
    assert "a wall-clock timestamp" in reasons["args.logging_dir"]


def test_a_changed_hyperparameter_next_to_run_paths_is_still_a_difference(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        torch.save(
            {"state_dict": weights(), "args": {"output": str(out), "lr": [0.1, 0.2][run]}}, out / "c.pt"
        )

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert [e["name"] for e in result.value_differences] == ["args.lr"]


def test_tensors_keyed_by_the_runs_own_checkpoint_paths_are_matched(tmp_path: Path) -> None:
    """Lightning's ModelCheckpoint keeps best_k_models keyed by checkpoint path, with tensor scores."""

    def write(out: Path, _run: int) -> None:
        best = {f"{out}/epoch=1.ckpt": torch.tensor(0.25), f"{out}/epoch=0.ckpt": torch.tensor(0.5)}
        torch.save(
            {"state_dict": weights(), "callbacks": {"ModelCheckpoint": {"best_k_models": best}}},
            out / "last.ckpt",
        )

    result = two_runs(tmp_path, write)
    assert result.verdict == compare.IDENTICAL, terminal.comparison_text(result)


def test_output_file_names_that_differ_are_named_even_when_contents_match(tmp_path: Path) -> None:
    result = two_runs(
        tmp_path, lambda out, run: torch.save(weights(), out / f"model-{['1f3a', '9c2e'][run]}.pt")
    )
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert result.renamed == [{"a": "model-1f3a.pt", "b": "model-9c2e.pt", "same_content": True}]
    assert "file names differ" in result.sentence


def test_file_names_holding_a_timestamp_are_paired(tmp_path: Path) -> None:
    result = two_runs(
        tmp_path,
        lambda out, run: torch.save(weights(), out / f"model-2026-11-23_12-0{run}-00.pt"),
    )
    assert (result.verdict, result.grade) == (compare.IDENTICAL, compare.REPRODUCED)


def test_csv_metrics_are_compared_cell_by_cell(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        (out / "metrics.csv").write_text(f"epoch,step,val_loss\n0,10,0.5\n1,20,{['0.25', '0.26'][run]}\n")

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert [(e["name"], e["a"], e["b"]) for e in result.value_differences] == [("1.val_loss", "0.25", "0.26")]


def test_plain_text_logs_are_masked_then_compared_by_line(tmp_path: Path) -> None:
    stamped = two_runs(
        tmp_path / "stamped",
        lambda out, run: (out / "train.log").write_text(f"2026-11-23 12:0{run}:05 step 1 loss 0.5\n"),
    )
    assert stamped.grade == compare.REPRODUCED
    outside = two_runs(  # the same shape, but no reading of run b's clock: a real difference
        tmp_path / "outside",
        lambda out, run: (out / "train.log").write_text(f"2026-11-23 12:00:0{run} step 1 loss 0.5\n"),
    )
    assert outside.grade == compare.NOT_REPRODUCIBLE
    changed = two_runs(
        tmp_path / "changed",
        lambda out, run: (out / "train.log").write_text(f"step 1 loss {['0.5', '0.6'][run]}\n"),
    )
    assert changed.grade == compare.NOT_REPRODUCIBLE
    assert changed.value_differences[0]["name"] == "line 1"


def test_the_job_file_can_ignore_files_and_values(tmp_path: Path) -> None:
    job = {"compare": {"ignore": [{"file": "*.log", "key": None}, {"file": "ckpt.pt", "key": "meta.*"}]}}

    def write(out: Path, run: int) -> None:
        (out / "train.log").write_text(f"loss {run}\n")
        torch.save({"model": weights(), "meta": {"seen": run}}, out / "ckpt.pt")

    result = two_runs(tmp_path, write, job=job)
    assert (result.verdict, result.grade) == (compare.IDENTICAL, compare.REPRODUCED)
    assert {(e["checkpoint"], e["name"]) for e in result.ignored} == {
        ("train.log", "<file>"),
        ("ckpt.pt", "meta.seen"),
    }


def test_secret_values_are_never_shown(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        torch.save({"model": weights(), "hub_token": f"hf_{run}Zq8Wk"}, out / "ckpt.pt")

    result = two_runs(tmp_path, write)
    assert result.value_differences[0]["a"] == "<redacted>"
    assert "Zq8Wk" not in json.dumps(result.to_json())


def test_sentence_and_grade_are_in_the_json(tmp_path: Path) -> None:
    result = two_runs(tmp_path, lambda out, _r: torch.save(weights(), out / "m.pt")).to_json()
    assert result["grade"] == "bit-identical"
    assert result["sentence"].startswith("bit-identical")
    for key in ("value_differences", "run_specific", "ignored", "renamed_files", "format_only"):
        assert result[key] == []


def test_a_tools_run_id_in_its_path_is_run_specific_inside_its_files_too(tmp_path: Path) -> None:
    """MLflow's run meta.yaml holds the run id its folder is named by; W&B's files hold theirs."""
    ids = ("8b1ddba06a1947bc8555232a1573b850", "219cd6ee86f742dd847c57de4e6992a9")

    def write(out: Path, run: int) -> None:
        folder = out / "mlruns" / "0" / ids[run]
        folder.mkdir(parents=True)
        (folder / "meta.yaml").write_text(
            f"run_id: {ids[run]}\nartifact_uri: file:///somewhere/mlruns/0/{ids[run]}/artifacts\nstatus: 3\n"
        )

    result = two_runs(tmp_path, write)
    assert result.grade == compare.REPRODUCED, result.sentence
    reasons = {e["name"]: e["reason"] for e in result.run_specific}
    assert reasons["run_id"] == reasons["artifact_uri"] == "a run id or time in the file's own path"
    assert reasons["<file>"] == f"file name: {PAIRED_FOLDER}"


def test_a_changed_value_beside_a_run_id_is_still_real(tmp_path: Path) -> None:
    ids = ("8b1ddba06a1947bc8555232a1573b850", "219cd6ee86f742dd847c57de4e6992a9")

    def write(out: Path, run: int) -> None:
        folder = out / "mlruns" / "0" / ids[run]
        folder.mkdir(parents=True)
        (folder / "meta.yaml").write_text(f"run_id: {ids[run]}\nstatus: {run + 3}\n")

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert [e["name"] for e in result.value_differences] == ["status"]


# -- the rules themselves ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("log_history.3.train_runtime", "a duration or throughput figure"),
        ("eval_samples_per_second", "a duration or throughput figure"),
        ("epoch_time", "a duration or throughput figure"),
        ("saved_at", "a wall-clock timestamp"),
        ("meta.timestamp", "a wall-clock timestamp"),
        ("hostname", "the host name"),
        ("pid", "a process id"),
        ("val_acc", None),
        ("max_steps", None),
        ("global_step", None),
        ("learning_rate", None),
        ("total_flos", None),
    ],
)
def test_names_that_mark_run_specific_scalars(name: str, expected: str | None) -> None:
    assert reason_by_key(name) == expected


def test_masks_are_narrow() -> None:
    run = RunContext(paths=("/runs/j/r1/outputs", "/runs/j/r1"), run_id="r1x", hostname="gpu7")
    assert mask("/runs/j/r1/outputs/x.pt", run)[0] == "<run>/x.pt"
    assert mask("gpu7.cluster", run)[0] == "<host>.cluster"
    assert mask("gpu77", run)[0] == "gpu77"  # not a word of its own
    assert mask("lr=0.001 batch=1024", run) == ("lr=0.001 batch=1024", set())


def test_durations_are_excused_only_as_scalars_and_never_other_keys() -> None:
    start = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc).timestamp()
    run = RunContext(paths=(), run_id="", hostname=None, window=Window(start, start + 10))
    assert classify_value("train_runtime", 3.1, 3.4, run, run) is not None
    assert classify_value("train_runtime", True, False, run, run) is None
    assert classify_value("val_acc", 0.9, 0.91, run, run) is None
    assert (
        classify_value("note", "done at 12:00:01", "done at 12:00:07", run, run) == "a wall-clock timestamp"
    )
    assert classify_value("note", "loss 0.5", "loss 0.6", run, run) is None
    assert classify_value("args", argparse.Namespace(a=1), argparse.Namespace(a=2), run, run) is None


def test_a_yaml_alias_bomb_is_compared_as_bytes_not_expanded(tmp_path: Path) -> None:
    from reprobox.guest.hashing._text import plan_text

    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]  # 10**10 values
    bomb = tmp_path / "hparams.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    content = plan_text(bomb)
    assert content.format == "file"
    assert "expands to more than" in (content.note or "")


def test_output_names_from_records_never_leave_the_outputs_folder(tmp_path: Path) -> None:
    import os

    from reprobox.outputvalues import output_file

    outputs = tmp_path / "outputs"
    (outputs / "sub").mkdir(parents=True)
    (outputs / "sub" / "ok.json").write_text("{}")
    secret = tmp_path / "secret.txt"
    secret.write_text("password")
    (outputs / "link.txt").symlink_to(secret)
    (outputs / "dirlink").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(outputs / "pipe.txt")
    assert output_file(outputs, "sub/ok.json") == outputs / "sub" / "ok.json"
    (outputs / "latest.json").symlink_to("sub/ok.json")  # W&B's wandb/debug.log links into its run folder
    assert output_file(outputs, "latest.json") == outputs / "sub" / "ok.json"
    for name in (
        "../secret.txt",
        str(secret),
        "link.txt",
        "dirlink/secret.txt",
        "pipe.txt",
        "sub",
        "",
        "gone",
    ):
        assert output_file(outputs, name) is None, name


def test_a_record_naming_a_file_outside_the_outputs_shows_nothing_of_it(tmp_path: Path) -> None:
    """A job controls its guest record; the controller must not read what that record points at."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root:topsecret\n")

    def write(out: Path, run: int) -> None:
        (out / "log.txt").write_text(f"line {run}\n")

    a = make_run(tmp_path / "a", "20261123T120000Z-aaaaaa", lambda out: write(out, 0))
    b = make_run(tmp_path / "b", "20261123T120105Z-bbbbbb", lambda out: write(out, 1))
    for record in (a, b):
        record.data["checkpoints"][0]["path"] = "../../../../../secret.txt"
    result = compare.compare_runs([a, b])
    assert result.grade == compare.NO_VERDICT  # what the record points at is never read, so not compared
    assert "topsecret" not in json.dumps(result.to_json())


def test_a_saved_config_with_a_run_name_stamped_from_the_clock_reproduces(tmp_path: Path) -> None:
    """nanoGPT-derived scripts save their whole config: ``"run" + strftime("%Y_%m_%d_%H_%M_%S")``."""

    def write(stamps: tuple[str, str]) -> Callable[[Path, int], None]:
        def save(out: Path, run: int) -> None:
            config = {"wandb_run_name": f"run{stamps[run]}", "learning_rate": 6e-4}
            torch.save({"model": weights(), "config": config, "iter_num": 5}, out / "ckpt.pt")

        return save

    own = two_runs(tmp_path / "own", write(("2026_11_23_12_00_30", "2026_11_23_12_01_24")))
    assert (own.verdict, own.grade) == (compare.IDENTICAL, compare.REPRODUCED), own.sentence
    (entry,) = own.run_specific
    assert (entry["name"], entry["reason"]) == ("config.wandb_run_name", "a wall-clock timestamp")
    # the same layout, but b's stamp is no reading of b's clock (it lies in a's window)
    other = two_runs(tmp_path / "other", write(("2026_11_23_12_00_30", "2026_11_23_12_00_31")))
    assert other.grade == compare.NOT_REPRODUCIBLE
    assert [e["name"] for e in other.value_differences] == ["config.wandb_run_name"]


def test_an_sb3_progress_log_excuses_its_rates_and_names_its_entropy(tmp_path: Path) -> None:
    """SB3's CSV logger: time/fps and time/time_elapsed beside computed train/ figures."""

    def write(entropy: tuple[str, str]) -> Callable[[Path, int], None]:
        def log(out: Path, run: int) -> None:
            (out / "progress.csv").write_text(
                "time/fps,time/time_elapsed,time/total_timesteps,train/entropy_loss\n"
                f"{[812, 790][run]},{[2, 3][run]},2048,{entropy[run]}\n"
            )

        return log

    same = two_runs(tmp_path / "same", write(("-0.6921", "-0.6921")))
    assert same.grade == compare.REPRODUCED, same.sentence
    assert {e["name"]: e["reason"] for e in same.run_specific} == {
        "0.time/fps": DURATION_BY_NAME,
        "0.time/time_elapsed": DURATION_BY_NAME,
    }
    noisy = two_runs(tmp_path / "noisy", write(("-0.6921", "-0.6925")))
    assert noisy.grade == compare.NOT_REPRODUCIBLE
    assert [e["name"] for e in noisy.value_differences] == ["0.train/entropy_loss"]


def test_stamped_lines_of_concurrent_writers_may_come_in_another_order(tmp_path: Path) -> None:
    """W&B's debug-internal.log: goroutines log 'stream: started' and 'handler: started' in either order,
    each line stamped with its run's clock. Unstamped lines in another order stay a difference."""

    def write(stamped: bool) -> Callable[[Path, int], None]:
        def log(out: Path, run: int) -> None:
            minute = f"12:0{run}"
            lines = [f"{minute}:05.97{i} " if stamped else "" for i in range(3)]
            messages = ["wandb-core", "stream: started", "handler: started"]
            if run:
                messages[1:] = messages[2:0:-1]
            (out / "debug-internal.log").write_text(
                "".join(f"{s}{m}\n" for s, m in zip(lines, messages, strict=True))
            )

        return log

    stamped = two_runs(tmp_path / "stamped", write(True))
    assert stamped.grade == compare.REPRODUCED, stamped.sentence
    assert "in another order" in stamped.run_specific[0]["reason"]
    plain = two_runs(tmp_path / "plain", write(False))
    assert plain.grade == compare.NOT_REPRODUCIBLE
