"""A job file `reprobox init` wrote from a repository as its authors left it verifies in containers as it
does locally: the working copy, the folder the command starts in, the repository's own package on
PYTHONPATH and the git-ignored data linked where the script reads it, all inside a hardened container."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from foreign_repos import make_repo

from reprobox import cli

pytestmark = pytest.mark.integration


def test_an_init_job_verifies_in_containers(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, offline_base: str, wheelhouse: Path
) -> None:
    scripts = make_repo(tmp_path / "repo")
    monkeypatch.chdir(scripts)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "repo"))
    monkeypatch.setenv("TRAIN_MODE", "fast")
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))
    # `python`, as its README says: this venv's on the host, the image's own in the container
    assert cli.main(["init", "-q", "--", "python", "train.py", "--steps", "3"]) == 0
    capsys.readouterr()
    code = cli.main(
        [
            *("verify", "job.yaml", "--runtime", "docker", "--runs-dir", str(tmp_path / "runs")),
            *("--no-attestation", "--json", "-q"),
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["grade"] == "reproduced", data["sentence"]
    paths = {c["path"] for c in data["checkpoints"]}
    assert "scripts/out/model-fast.pt" in paths
    assert "scripts/train.log" in paths and data["ignored"] == []  # the log compared, its stamp excused
    # the event file is compared, its name's time, host and pid excused
    assert "events.out.tfevents" in json.dumps(data["run_specific"])
