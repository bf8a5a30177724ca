"""Seed spread on the local runtime: `verify --seeds N` (each seed bit-reproducible, every claim's mean and
std attested) and `reproduce --seeds N` (the reviewer's spread against the author's)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest
from publishing import JOBS, edit_attestation, fresh_copy

from reprobox import attest, cli


def run_cli(args: list[str], capsys: Any) -> tuple[int, dict[str, Any]]:
    code = cli.main([*args, "--json", "-q"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


@pytest.fixture(scope="module")
def three_seeds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The author: a job with paper-claims' claims (in NumPy: the seeds are the point) verified with three
    seeds."""
    where = tmp_path_factory.mktemp("author")
    shutil.copytree(JOBS / "claims-seeds", where / "code")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = cli.main(
            [
                "verify",
                str(where / "code" / "job.yaml"),
                *("--seeds", "3", "--runtime", "local", "--runs-dir", str(where / "runs"), "--json", "-q"),
            ]
        )
    assert code == 0, buffer.getvalue()
    return where / "code" / attest.ATTESTATION_NAME, json.loads(buffer.getvalue())


def test_every_seed_is_verified_and_the_spread_is_their_statistics(three_seeds) -> None:
    attestation, data = three_seeds
    assert [(s["seed"], s["verdict"], len(s["runs"])) for s in data["seeds"]] == [
        (0, "identical", 2),
        (1, "identical", 2),
        (2, "identical", 2),
    ]
    for name in ("val_acc", "val_loss", "logged_acc"):
        spread = data["spread"][name]
        assert spread["seeds"] == [0, 1, 2]
        assert spread["mean"] == pytest.approx(statistics.fmean(spread["values"]))
        assert spread["std"] == pytest.approx(statistics.stdev(spread["values"]))
    assert len(set(data["spread"]["val_loss"]["values"])) == 3  # the seed reaches the job: three draws
    recorded = attest.read_attestation(attestation).seeds
    assert recorded is not None and recorded["seeds"] == [0, 1, 2] and recorded["runs_per_seed"] == 2
    assert recorded["claims"]["val_loss"]["values"] == data["spread"]["val_loss"]["values"]
    assert set(recorded["checkpoints"]) == {"0", "1", "2"}


def test_the_reviewers_spread_holds_on_the_same_stack(three_seeds, tmp_path: Path, capsys) -> None:
    clone = fresh_copy(three_seeds[0], tmp_path / "clone")
    code, data = run_cli(
        ["reproduce", str(clone), "--seeds", "2", "--runtime", "local", "--runs-dir", str(tmp_path / "r")],
        capsys,
    )
    assert code == 0, data["sentence"]
    assert data["sentence"].endswith("the spread over 2 seeds holds (val_acc, val_loss, logged_acc)")
    assert [r["seed"] for r in data["seed_runs"]] == [0, 1]
    assert all(r["identical_to_published"] for r in data["seed_runs"])
    spread = data["seed_spread"]["val_loss"]
    assert spread["holds"] and spread["published_in_reproduced"] and spread["reproduced_in_published"]
    assert len(spread["reproduced"]["values"]) == 2 and len(spread["published"]["values"]) == 3


def test_more_seeds_than_published_is_refused_before_running(three_seeds, tmp_path: Path, capsys) -> None:
    clone = fresh_copy(three_seeds[0], tmp_path / "clone")
    runs = tmp_path / "r"
    code = cli.main(["reproduce", str(clone), "--seeds", "4", "--runtime", "local", "--runs-dir", str(runs)])
    assert code == 2
    assert (
        "--seeds must be from 2 to 3, the seeds the attestation records (0, 1, 2), not 4"
        in capsys.readouterr().err
    )
    assert not runs.exists()


def test_an_edited_spread_is_caught_when_read(three_seeds, tmp_path: Path, capsys) -> None:
    clone = fresh_copy(three_seeds[0], tmp_path / "clone")
    edit_attestation(clone, lambda s: s["predicate"]["seeds"]["claims"]["val_acc"].update(mean=0.999))
    code = cli.main(["reproduce", str(clone), "--runtime", "local", "--runs-dir", str(tmp_path / "r")])
    assert code == 2
    assert "predicate.seeds.claims.val_acc: mean and std do not match its values" in capsys.readouterr().err


def test_a_spread_that_moves_on_another_stack_does_not_hold(tmp_path: Path, capsys) -> None:
    """Accuracy 0.70 + 0.05 per thread whatever the seed: std 0, and another thread count moves the mean."""
    shutil.copytree(JOBS / "claims-follow-threads-numpy", tmp_path / "code")
    code, data = run_cli(
        [
            "verify",
            str(tmp_path / "code" / "job.yaml"),
            "--seeds",
            "2",
            "--runtime",
            "local",
            "--runs-dir",
            str(tmp_path / "a"),
        ],
        capsys,
    )
    assert code == 0 and data["spread"]["val_acc"]["std"] == 0
    threads = "1" if data["spread"]["val_acc"]["mean"] != pytest.approx(0.75) else "2"
    code, data = run_cli(
        [
            "reproduce",
            str(tmp_path / "code" / attest.ATTESTATION_NAME),
            *("--seeds", "2", "--threads", threads, "--runtime", "local", "--runs-dir", str(tmp_path / "r")),
        ],
        capsys,
    )
    assert code == 1
    assert data["grade"] == "not-reproduced"
    assert data["sentence"].startswith("not reproduced: the spread over 2 seeds does not hold (val_acc: ")
    assert data["seed_spread"]["val_acc"]["holds"] is False


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--seeds", "1"], "--seeds must be from 2 to 100, not 1"),
        (["--seeds", "2", "--vary", "tz"], "--seeds and --vary are separate checks"),
    ],
)
def test_bad_seed_counts_are_refused(flags: list[str], message: str, tmp_path: Path, capsys) -> None:
    runs = tmp_path / "runs"
    code = cli.main(
        [
            "verify",
            str(JOBS / "publish-small" / "job.yaml"),
            *flags,
            "--runtime",
            "local",
            "--runs-dir",
            str(runs),
        ]
    )
    assert code == 2
    assert message in capsys.readouterr().err
    assert not runs.exists()
