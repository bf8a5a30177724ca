"""The CLI on the docker runtime and `docker-compose up`, against the real engine and the real image."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from reprobox import cli
from reprobox.engine import Engine
from reprobox.image import MANAGED_LABEL
from reprobox.records.manifest import read_record
from tests.offline_messages import assert_names_the_offline_path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny-mlp" / "job.yaml"

pytestmark = pytest.mark.integration


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch, offline_base: str, wheelhouse: Path) -> None:
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))


def test_verify_example_in_containers(
    offline_env: None, tmp_path: Path, capsys, engine: Engine, containers_added
) -> None:
    # the engine may hold containers from earlier sessions; this run must add none (probe or job)
    containers_before = set(engine.list_containers([MANAGED_LABEL]))
    code = cli.main(
        [
            "verify",
            str(EXAMPLE),
            "--runs",
            "3",  # as README.md shows it
            "--runtime",
            "docker",
            "--runs-dir",
            str(tmp_path),
            "--json",
            "-q",
            "--attestation",
            str(tmp_path / "reprobox.attestation.json"),
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0, data
    assert data["verdict"] == "identical" and len(data["runs"]) == 3
    assert data["sentence"] == "bit-identical: every output file is byte for byte the same across 3 runs"
    assert [(c["path"], c["identical"]) for c in data["checkpoints"]] == [("model.pt", True)]
    for run in data["runs"]:
        record = read_record(run)
        image = record.data["runtime"]["image"]
        assert image["id"].startswith("sha256:")
        assert record.fingerprint["software"]["image"]["id"] == image["id"]
        container = record.data["runtime"]["container"]
        assert container["network_mode"] == "none" and container["cap_drop"] == ["ALL"]
        assert container["user"] != "0" and not container["user"].startswith("0:")
    assert not (left := containers_added(engine, containers_before)), left


def test_bad_job_on_docker_runtime_is_exit_2_before_any_engine_work(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "job.yaml"
    bad.write_text("version: 1\nname: x\n")
    assert cli.main(["run", str(bad), "--runtime", "docker", "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "command: is missing" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_base_that_cannot_be_pulled_names_both_offline_variables(
    monkeypatch: pytest.MonkeyPatch, capsys, engine: Engine
) -> None:
    """Forgetting REPROBOX_BASE_IMAGE (here: a base no registry has) is exit 4 with one sentence that
    names the wheelhouse's variable and command too, not only the base's."""
    monkeypatch.delenv("REPROBOX_BASE_IMAGE", raising=False)
    monkeypatch.delenv("REPROBOX_WHEELHOUSE", raising=False)
    missing = f"reprobox/no-such-base:{uuid.uuid4().hex[:12]}"
    assert cli.main(["build", str(EXAMPLE), "--base-image", missing, "-q"]) == 4
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors[0].startswith(f"error: base image {missing} is not present and cannot be pulled here; ")
    assert_names_the_offline_path(errors[0], "reprobox lock --base cpu --wheelhouse DIR")


@pytest.fixture
def compose_project(offline_base: str, wheelhouse: Path) -> tuple[list[str], dict[str, str]]:
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose (Compose v1, Debian's package) is not installed")
    house = ROOT / "wheelhouse"
    if not house.exists():
        shutil.copytree(
            wheelhouse, house
        )  # Compose builds from the checkout: the wheelhouse must be inside it
    env = {
        **os.environ,
        "REPROBOX_BASE_IMAGE": offline_base,
        "REPROBOX_LOCK_FILE": "env/requirements-cpu.lock",
        "REPROBOX_COMPOSE_WHEELHOUSE": "wheelhouse",
    }
    command = ["docker-compose", "-p", f"reprobox-test-{uuid.uuid4().hex[:8]}"]
    yield command, env
    subprocess.run(
        [*command, "down", "--volumes", "--remove-orphans"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=False,
    )


def test_compose_verdict_is_the_exit_code(compose_project: tuple[list[str], dict[str, str]]) -> None:
    command, env = compose_project
    subprocess.run([*command, "build"], cwd=ROOT, env=env, check=True, capture_output=True)
    same = subprocess.run(
        [*command, "up", "--exit-code-from", "verdict", "verdict"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert same.returncode == 0, same.stdout[-2000:] + same.stderr[-2000:]
    assert "bit-identical: every output file is byte for byte the same across 2 runs" in same.stdout
    differ = subprocess.run(
        [*command, "up", "--exit-code-from", "verdict", "verdict"],
        cwd=ROOT,
        env={**env, "REPROBOX_RUN_B_SEED": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert differ.returncode == 1, differ.stdout[-2000:]
    assert "different inputs: seed 0 vs 1" in differ.stdout


def test_fingerprint_inside_the_image(offline_env: None, capsys) -> None:
    assert cli.main(["fingerprint", "--runtime", "docker", "--json", "-q"]) == 0
    fingerprint = json.loads(capsys.readouterr().out)
    software = fingerprint["software"]
    assert software["image"]["id"].startswith("sha256:")
    assert software["torch"]["version"].startswith("2.13.0")
    assert software["environment"]["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"  # baked into the image
    assert len(fingerprint["stack_digest"]) == 64
