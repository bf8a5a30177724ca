"""What `verify --vary all` must find on tests/jobs/vary-each-factor, on any runtime: each varied
factor changes exactly its own file, and a factor the runtime cannot apply says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli

JOB = Path(__file__).parent / "jobs" / "vary-each-factor"

NOT_TORCHRUN = "not applicable (the job does not use torchrun)"


def vary_all(capsys: pytest.CaptureFixture[str], tmp_path: Path, runtime: str) -> tuple[int, dict[str, Any]]:
    """`reprobox verify JOB --vary all --json` on `runtime`: its exit code and its matrix."""
    capsys.readouterr()
    runs = str(tmp_path / "runs")
    code = cli.main(
        [
            "verify",
            str(JOB),
            "--vary",
            "all",
            "--runtime",
            runtime,
            "--runs-dir",
            runs,
            "--no-attestation",
            "--json",
            "-q",
        ]
    )
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, data


def assert_each_factor_changes_only_its_own_file(
    data: dict[str, Any], runtime: str, unsupported: set[str]
) -> None:
    assert data["baseline"]["reproducible"], data["baseline"]
    rows = {row["factor"]: row for row in data["factors"]}
    assert rows["world-size"]["reason"] == NOT_TORCHRUN
    for name in unsupported:
        assert rows[name]["status"] == "unsupported", rows[name]
        assert rows[name]["reason"] == f"unsupported on {runtime} (vary it with --runtime docker or podman)"
    varied = set(rows) - unsupported - {"world-size"}
    assert varied == {
        "threads", "cpu-isa", "workers", "tz", "locale", "env-order", "hostname", "user", "cwd", "home",
        "umask", "file-order", "time",
    } - unsupported  # fmt: skip
    for name in sorted(varied):
        row = rows[name]
        assert (row["status"], row["files"]) == ("sensitive", [f"observed/{name}.json"]), row
    assert sorted(data["sensitive"]) == sorted(varied)
