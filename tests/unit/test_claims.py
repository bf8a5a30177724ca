"""Claims read from what a run left (every format, untrusted files) and judged against published values."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reprobox.claims import check_claim, extract_claim, judge_recorded
from reprobox.jobfile import Claim, load_job


def claim(file: str, key: str, **criteria: float | bool) -> Claim:
    return Claim(name="acc", file=file, key=key, **criteria)  # type: ignore[arg-type]


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    folder = tmp_path / "outputs"
    folder.mkdir()
    (folder / "metrics.json").write_text('{"eval": {"acc": [0.5, 0.91]}, "a.b": 3}')
    (folder / "trainer_state.json").write_text(
        '{"log_history": [{"loss": 1.0}, {"eval_accuracy": 0.88}, {"loss": 0.5}]}'
    )
    (folder / "metrics.jsonl").write_text('{"acc": 0.1}\n{"acc": 0.2}\n{"loss": 3}\n')
    (folder / "results.yaml").write_text("test:\n  bleu: 27.3\n")
    (folder / "metrics.csv").write_text("step,train_loss,val_acc\n1,0.9,\n2,0.8,0.93\n3,0.7,\n")
    (folder / "scores.tsv").write_text("model\tf1\nours\t0.812\n")
    (folder / "summary.txt").write_text("final top-1: 76.1%\n")
    return folder


@pytest.mark.parametrize(
    ("file", "key", "expected"),
    [
        ("metrics.json", "eval.acc.-1", 0.91),
        ("metrics.json", "eval.acc.0", 0.5),
        ("metrics.json", "a.b", 3.0),  # a whole key with a dot wins
        ("trainer_state.json", "log_history.1.eval_accuracy", 0.88),
        ("metrics.jsonl", "acc", 0.2),  # the last line that has the key
        ("results.yaml", "test.bleu", 27.3),
        ("metrics.csv", "val_acc", 0.93),  # the last row that fills the column
        ("scores.tsv", "f1", 0.812),
        ("summary.txt", r"top-1: ([0-9.]+)%", 76.1),
        ("stdout", r"val_acc=([0-9.]+)", 0.97),  # the last match in the log
    ],
)
def test_every_format_gives_the_number(outputs: Path, file: str, key: str, expected: float) -> None:
    log = outputs.parent / "stdout.log"
    log.write_text("epoch 1 val_acc=0.5\nepoch 2 val_acc=0.97\n")
    found = extract_claim(claim(file, key, tolerance=0.0), outputs, log)
    assert found.error is None
    assert found.value == expected
    assert found.sha256 is not None and len(found.sha256) == 64


@pytest.mark.parametrize(
    ("file", "key", "message"),
    [
        ("missing.json", "acc", "claim acc: missing.json was not written"),
        ("metrics.json", "eval.f1", "metrics.json has no key 'eval.f1' (no 'f1' there)"),
        ("metrics.json", "eval.acc.7", "has no key 'eval.acc.7'"),
        ("metrics.json", "eval", "not a finite number"),
        ("metrics.csv", "test_acc", "has no column 'test_acc' (columns: step, train_loss, val_acc)"),
        ("summary.txt", r"top-5: ([0-9.]+)", "has no line matching"),
    ],
)
def test_a_missing_or_wrong_value_names_the_claim(outputs: Path, file: str, key: str, message: str) -> None:
    found = extract_claim(claim(file, key, tolerance=0.0), outputs, outputs.parent / "stdout.log")
    assert found.value is None
    assert found.error is not None and message in found.error
    assert found.error.startswith("claim acc: ")


def test_a_pattern_names_one_file(outputs: Path) -> None:
    version = outputs / "logs" / "version_0"
    version.mkdir(parents=True)
    (version / "metrics.csv").write_text("epoch,val_loss\n0,0.5\n1,0.25\n")
    found = extract_claim(claim("logs/version_*/metrics.csv", "val_loss", tolerance=0.0), outputs, outputs)
    assert (found.value, found.error) == (0.25, None)
    (outputs / "logs" / "version_1").mkdir()
    (outputs / "logs" / "version_1" / "metrics.csv").write_text("epoch,val_loss\n0,0.5\n")
    found = extract_claim(claim("logs/version_*/metrics.csv", "val_loss", tolerance=0.0), outputs, outputs)
    assert found.error is not None and "matches 2 files (logs/version_0/metrics.csv, " in found.error


def test_a_link_out_of_the_outputs_is_not_followed(outputs: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"acc": 0.99}')
    (outputs / "linked.json").symlink_to(secret)
    found = extract_claim(claim("linked.json", "acc", tolerance=0.0), outputs, tmp_path / "log")
    assert found.value is None
    assert found.error is not None and "cannot be read" in found.error


def test_a_fifo_does_not_block_the_controller(outputs: Path) -> None:
    os.mkfifo(outputs / "pipe.json")
    found = extract_claim(claim("pipe.json", "acc", tolerance=0.0), outputs, outputs / "log")
    assert found.error is not None and "cannot be read" in found.error


def test_deeply_nested_json_is_refused_not_recursed(outputs: Path) -> None:
    (outputs / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    found = extract_claim(claim("deep.json", "0", tolerance=0.0), outputs, outputs / "log")
    assert found.error is not None and "not valid JSON" in found.error


@pytest.mark.parametrize(
    ("criteria", "published", "reproduced", "holds"),
    [
        ({"tolerance": 0.01}, 0.975, 0.97, True),
        ({"tolerance": 0.01}, 0.975, 0.96, False),
        ({"tolerance": 0.0}, 0.975, 0.975, True),
        ({"tolerance": 0.01, "relative": True}, 27.3, 27.1, True),  # 1% of 27.3 is 0.273
        ({"tolerance": 0.01, "relative": True}, 27.3, 26.9, False),
        ({"at_least": 0.9}, 0.975, 0.91, True),
        ({"at_least": 0.9}, 0.975, 0.89, False),
        ({"at_most": 2.0}, 1.5, 2.5, False),
        ({"tolerance": 0.5, "at_least": 0.9}, 0.95, 0.85, False),  # every criterion must hold
        ({"tolerance": 0.01}, 0.975, float("nan"), False),
        ({"tolerance": 0.01}, 0.975, None, False),
    ],
)
def test_a_claim_holds_within_its_criteria(
    criteria: dict[str, float | bool], published: float, reproduced: float | None, holds: bool
) -> None:
    check = check_claim(claim("m.json", "acc", **criteria), published, reproduced)
    assert check.holds is holds
    assert (check.reason is None) is holds


def test_the_sentence_says_both_numbers_and_what_was_allowed() -> None:
    check = check_claim(claim("m.json", "acc", tolerance=0.01), 0.975, 0.95)
    assert check.sentence() == "acc 0.95 (published 0.975, allowed ±0.01: off by 0.025, more than 0.01)"
    relative = check_claim(claim("m.json", "acc", tolerance=0.02, relative=True), 50.0, 50.5)
    assert relative.allowed == "±2% = 1"


def test_the_authors_run_checks_its_own_bounds(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        "version: 1\nname: j\ncommand: [python, t.py]\nclaims:\n"
        "  - {name: acc, file: m.json, key: acc, at_least: 0.9}\n"
        "  - {name: loss, file: m.json, key: loss, tolerance: 1%}\n"
    )
    spec = load_job(job)
    judged = judge_recorded(
        spec.claims,
        [{"name": "acc", "value": 0.8, "error": None}, {"name": "loss", "value": 2.0, "error": None}],
    )
    assert [(j["name"], j["bounds_hold"], j["criterion"]) for j in judged] == [
        ("acc", False, ">= 0.9"),
        ("loss", True, "±1% = 0.02"),
    ]
    assert judged[0]["problem"] == "below at_least 0.9"


def test_a_number_saved_in_a_checkpoint_is_read_without_unpickling(outputs: Path) -> None:
    """timm saves its top-1 as `metric` beside the weights; Lightning keeps scores in its callbacks."""
    import torch

    torch.save(
        {"state_dict": {"w": torch.zeros(2)}, "metric": 76.12, "loss": torch.tensor(0.5)},
        outputs / "best.pth.tar",
    )
    torch.save({"epoch": 3, "best": torch.tensor([0.25])}, outputs / "last.ckpt")
    for file, key, expected in (
        ("best.pth.tar", "metric", 76.12),
        ("best.pth.tar", "loss", 0.5),
        ("last.ckpt", "best", 0.25),
    ):
        found = extract_claim(claim(file, key, tolerance=0.0), outputs, outputs / "log")
        assert (found.value, found.error) == (expected, None), found
    missing = extract_claim(claim("last.ckpt", "state_dict.w", tolerance=0.0), outputs, outputs / "log")
    assert missing.error == "claim acc: last.ckpt holds no value named 'state_dict.w'"
    (outputs / "evil.pt").write_bytes(b"\x80\x04cos\nsystem\n(S'touch pwned'\ntR.")
    refused = extract_claim(claim("evil.pt", "x", tolerance=0.0), outputs, outputs / "log")
    assert refused.value is None and refused.error is not None  # refused or unnamed: never run
    assert not Path("pwned").exists()
