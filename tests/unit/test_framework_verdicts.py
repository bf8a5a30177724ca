"""Verdicts on jobs written the way framework users write them, run for real on the local runtime.

Seeded or not, these jobs compute the same weights every run; what differs is what names the run (its
paths, its clock) or what truly varies (a metric drawn from os.urandom, a uuid file name). The verdict
must say which, with the values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli

JOBS = Path(__file__).parents[1] / "jobs"

pytestmark = pytest.mark.slow


def verify(
    job: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, dict[str, Any]]:
    code = cli.main(
        [
            "verify",
            str(JOBS / job),
            "--runtime",
            "local",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--no-attestation",
            "--json",
            *extra,
        ]
    )
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("job", ["mingpt-style", "timm-style", "full-model-pickle"])
def test_framework_shaped_jobs_reproduce(
    job: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result = verify(job, tmp_path, capsys)
    assert code == 0, result
    assert result["verdict"] == "identical"
    assert result["grade"] in ("bit-identical", "reproduced")
    assert not result["value_differences"]
    # timm's .pth.tar (an argparse Namespace inside) and a whole pickled model are read as tensors and
    # values, never compared as bytes alone
    manifest = json.loads((Path(result["runs"][0]) / "manifest.json").read_text())
    pickled = [c for c in manifest["checkpoints"] if c["format"] not in ("file", "json", "csv", "yaml")]
    assert pickled, manifest["checkpoints"]
    for checkpoint in pickled:
        assert checkpoint["tensors"], checkpoint
        assert checkpoint["reader"] in ("torch.load(weights_only=True)", "safe pickle reader")
    if job != "mingpt-style":
        assert "safe pickle reader" in {c["reader"] for c in pickled}


def test_a_changed_metric_with_equal_weights_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result = verify("changed-metric", tmp_path, capsys)
    assert code == 1
    assert result["grade"] == "not reproducible"
    names = {d["name"] for d in result["value_differences"]}
    assert any(name.endswith("val_acc") for name in names), result["value_differences"]
    assert "val_acc" in result["sentence"]
    assert result["differing_tensors"] == 0


def test_uuid_file_names_are_a_draw_the_run_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`<uuid4>.npz`: the name is what the run drew from os.urandom, so the files pair and the name is
    excused by that record (a name that differs with no such evidence: test_verdicts)."""
    code, result = verify("uuid-names", tmp_path, capsys)
    assert (code, result["grade"]) == (0, "reproduced"), result["sentence"]
    assert not result["renamed_files"]
    [excused] = result["run_specific"]
    assert (excused["name"], excused["reason"]) == (
        "<file>",
        "file name: a random id the run drew from the OS's entropy",
    )


def test_os_urandom_is_still_not_reproducible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, result = verify("urandom-npz", tmp_path, capsys)
    assert code == 1
    assert result["grade"] == "not reproducible"
    assert result["differing_tensors"] >= 1
