"""`reprobox cost` on the docker runtime: the job's own settings and a thread count, each twice in a
hardened container, the step clock read back from the runs, the thread row's verdict the one
`verify --vary threads` gives in the same container (tests/integration/test_docker_vary_cli.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from reprobox import cli

pytestmark = pytest.mark.integration

JOBS = Path(__file__).parents[1] / "jobs"


def test_cost_measures_settings_in_containers(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, offline_base: str, wheelhouse: Path
) -> None:
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))
    capsys.readouterr()
    code = cli.main(
        [
            "cost",
            str(JOBS / "vary-threads"),
            *("--runtime", "docker", "--runs-dir", str(tmp_path), "--only", "threads=1", "--json", "-q"),
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0, data
    rows = {row["name"]: row for row in data["settings"]}
    assert set(rows) == {"default", "threads=1"} and data["device"] == "cpu"
    assert all(row["bit_exact"] and row["step_seconds"] > 0 for row in rows.values())
    assert rows["threads=1"]["values"]["threads"] == 1
    if (os.cpu_count() or 1) > 1:  # the job sums one micro-batch per thread: one thread, other numbers
        assert rows["threads=1"]["same_numbers_as_default"] is False
    assert data["recommended"]["block"].startswith("determinism:\n  threads: ")
