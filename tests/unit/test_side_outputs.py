"""What jobs write besides checkpoints: names the logging tools stamp with the run paired, writers made
reproducible at the source (SOURCE_DATE_EPOCH, matplotlib's SVG ids), files reprobox cannot read never
called a real nondeterminism, and no verdict when nothing was compared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli

JOBS = Path(__file__).parents[1] / "jobs"

# A stamp file and a binary "plot" named and stamped the way logging tools do, beside a real model.
WRITER = """\
import os, socket, time
import numpy

out = os.environ["REPROBOX_OUTPUT_DIR"]
numpy.save(os.path.join(out, "model.npy"), numpy.arange(4.0))
host, stamp = socket.gethostname(), time.strftime("%b%d_%H-%M-%S")
folder = os.path.join(out, "runs", f"{stamp}_{host}")
os.makedirs(folder, exist_ok=True)
event = f"events.out.tfevents.{time.time():.6f}.{host}.{os.getpid()}.0"
open(os.path.join(folder, event), "wb").write(b"the same logged numbers")
if os.environ.get("PLOT") == "stamped":  # a binary file carrying the time
    open(os.path.join(out, "plot.bin"), "wb").write(b"\\x89BIN" + str(time.time_ns()).encode())
"""


def job(tmp_path: Path, *, plot: str = "none", extra: str = "") -> Path:
    folder = tmp_path / "job"
    folder.mkdir(exist_ok=True)
    (folder / "write.py").write_text(WRITER)
    (folder / "job.yaml").write_text(
        f"version: 1\nname: side-outputs\ncommand: [python, write.py]\nenv: {{PLOT: {plot}}}\n{extra}"
    )
    return folder


def verify(capsys: pytest.CaptureFixture[str], folder: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli.main(
        [
            "verify",
            str(folder),
            *("--runtime", "local", "--runs-dir", str(folder.parent / "runs"), "--json", "-q", *extra),
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def test_names_stamped_with_time_host_and_pid_are_paired(tmp_path: Path, capsys) -> None:
    code, data = verify(capsys, job(tmp_path), "--no-attestation")
    assert code == 0 and data["grade"] == "reproduced", data["sentence"]
    (renamed,) = [r for r in data["run_specific"] if r["name"] == "<file>"]
    assert "events.out.tfevents." in renamed["a"] and renamed["a"] != renamed["b"]
    reasons = set(renamed["reason"].removeprefix("file name: ").split(" and "))
    assert {"a process id", "a wall-clock timestamp"} <= reasons  # this run's pid and clock, as recorded
    assert reasons <= {"a process id", "a wall-clock timestamp", "the host name"}  # the same host: maybe
    assert data["compared_files"] == 2 and not data["one_sided_files"]


def test_an_unreadable_file_that_differs_leaves_no_verdict(tmp_path: Path, capsys) -> None:
    folder = job(tmp_path, plot="stamped")
    code, data = verify(capsys, folder)
    assert code == 3 and data["grade"] == "no verdict" and data["verdict"] == "failed"
    sentence = data["sentence"]
    assert "every tensor and value is equal, but 1 file differs that reprobox cannot read" in sentence
    assert "plot.bin (binary data, first difference at byte" in sentence
    assert "real nondeterminism" not in json.dumps(data)
    (entry,) = data["unreadable_files"]
    assert entry["first_difference"]["offset"] >= 4  # the magic is equal, the stamp is not
    assert not (folder / "reprobox.attestation.json").exists()


def test_an_unreadable_file_the_job_file_ignores_is_accepted(tmp_path: Path, capsys) -> None:
    folder = job(tmp_path, plot="stamped", extra='compare: {ignore: ["plot.bin"]}\n')
    code, data = verify(capsys, folder, "--no-attestation")
    assert code == 0 and data["grade"] == "reproduced", data["sentence"]
    assert [item["checkpoint"] for item in data["ignored"]] == ["plot.bin"]


def test_an_unreadable_checkpoint_that_differs_is_not_reproducible(tmp_path: Path, capsys) -> None:
    folder = job(tmp_path, plot="stamped", extra='checkpoints: ["*.npy", "*.bin"]\n')
    code, data = verify(capsys, folder, "--no-attestation", "--no-drill-down")
    assert code == 1 and data["grade"] == "not reproducible"
    assert "plot.bin (binary data) differs byte for byte and reprobox cannot read its format" in " ".join(
        data["notes"]
    )
    assert "real nondeterminism" not in data["explanation"]["sentence"]
    assert "not known" in data["explanation"]["sentence"]


def test_nothing_compared_is_no_verdict(tmp_path: Path, capsys) -> None:
    folder = job(tmp_path, extra='compare: {ignore: ["**"]}\n')
    code, data = verify(capsys, folder)
    assert code == 3 and data["grade"] == "no verdict"
    assert data["sentence"].startswith(
        "no verdict: nothing was compared: every output the runs wrote is ignored"
    )
    assert not (folder / "reprobox.attestation.json").exists()


def test_plots_are_written_reproducibly_at_the_source(tmp_path: Path, capsys) -> None:
    """matplotlib stamps PDFs with SOURCE_DATE_EPOCH, which the guest sets (and records); SVG element
    ids come from svg.hashsalt, which the startup hook sets where the job has not."""
    code, data = verify(capsys, JOBS / "plots-pdf", "--runs-dir", str(tmp_path / "runs"), "--no-attestation")
    assert code == 0 and data["grade"] == "bit-identical", data["sentence"]
    assert {c["path"] for c in data["checkpoints"]} == {"predict.pdf", "predict.svg"}
    from reprobox.records.manifest import read_record

    assert read_record(data["runs"][0]).environment["SOURCE_DATE_EPOCH"] == "315532800"
