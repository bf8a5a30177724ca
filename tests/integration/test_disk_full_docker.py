"""A container job that fills the disk holding the runs folder: one sentence and exit 4, as locally.

The guest in the container gives back the room set aside for its record (the run dir is lent to the
container's user) and says the disk was full; the controller records the run as failed for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from small_disk import small_disk

from reprobox import cli
from reprobox.engine import Engine
from reprobox.errors import EXIT_ENVIRONMENT
from reprobox.runtimes.docker._settings import RUN_ID_LABEL

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "jobs" / "fills-disk" / "job.yaml"

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_disk(tmp_path) as folder:
        yield folder


def test_a_container_job_that_fills_the_disk_is_recorded_as_failed(
    disk: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    engine: Engine,
    offline_base: str,
    wheelhouse: Path,
) -> None:
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    code = cli.main(["run", str(JOB), "--runtime", "docker", "--runs-dir", str(disk), "--json", "-q"])
    captured = capfd.readouterr()
    data = json.loads(captured.out)
    assert code == EXIT_ENVIRONMENT, (data, captured.err[-3000:])
    run_dir = Path(data["run_dir"])
    sentence = f"the disk holding {run_dir} is full: 0 bytes free; free space and rerun"
    assert data["error"]["message"] == sentence
    assert "Traceback" not in captured.err and not (tmp_path / "cache").exists()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert (manifest["status"], manifest["failure"], manifest["exit_code"]) == ("failed", sentence, 0)
    assert len(manifest["checkpoints"]) == 1  # the guest's record, written in the room set aside for it
    assert [p.name for p in disk.rglob("*") if re.search(r"\.tmp$|reserve", p.name)] == []
    assert engine.list_containers({RUN_ID_LABEL: run_dir.name}) == []  # others may share the engine
