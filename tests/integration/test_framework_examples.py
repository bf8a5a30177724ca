"""The Hugging Face Trainer and Lightning examples: `verify --runs 2` builds their images offline from the
base plus each example's extra lock, and reproduces them in containers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from reprobox import cli, image
from reprobox.engine import Engine
from reprobox.errors import EnvironmentProblem
from reprobox.jobfile import ImageSpec
from reprobox.records.manifest import read_record
from tests.image_checkout import in_image

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
EXAMPLES = {
    "hf-trainer": ("transformers", ["checkpoint-15/model.safetensors", "checkpoint-30/trainer_state.json"]),
    "lightning": ("lightning", ["logs/version_0/metrics.csv", "logs/version_0/hparams.yaml"]),
}

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def extra_lock(example: str) -> Path:
    return ROOT / "examples" / example / "requirements.lock"


@pytest.fixture(scope="session")
def framework_wheelhouse(wheelhouse: Path) -> Path:
    """The shared wheelhouse with the examples' wheels too (scripts/fill-wheelhouse.sh puts them there)."""
    for example in EXAMPLES:
        spec = ImageSpec(requirements=extra_lock(example))
        try:
            image.plan_build(spec, lock="cpu", wheelhouse=wheelhouse, environ={})
        except EnvironmentProblem:
            subprocess.run(
                [
                    "bash",
                    str(SCRIPTS / "fill-wheelhouse.sh"),
                    "--lock",
                    str(extra_lock(example)),
                    "--dest",
                    str(wheelhouse),
                ],
                check=True,
            )
    return wheelhouse


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch, offline_base: str, framework_wheelhouse: Path) -> None:
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(framework_wheelhouse))
    monkeypatch.delenv("REPROBOX_LOCK", raising=False)


def link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def test_a_jobs_own_wheelhouse_adds_to_the_shared_one(
    tmp_path: Path, offline_base: str, framework_wheelhouse: Path, project: image.ProjectFiles
) -> None:
    """Base wheels in the shared wheelhouse, the job's in its own: the same image as one full wheelhouse."""
    shared, own = tmp_path / "shared", tmp_path / "wheels"
    shared.mkdir()
    own.mkdir()
    base_pins = set(image.locked_pins(project.env_dir / "requirements-cpu.lock").items())
    job_pins = set(image.locked_pins(extra_lock("hf-trainer")).items())
    for wheel in framework_wheelhouse.glob("*.whl"):
        pin = image.wheel_pin(wheel.name)
        for pins, house in ((base_pins, shared), (job_pins, own)):
            if pin in pins:
                link_or_copy(wheel, house / wheel.name)
    split = image.plan_build(
        ImageSpec(requirements=extra_lock("hf-trainer"), wheelhouse=own),
        base_image=offline_base,
        wheelhouse=shared,
        project=project,
        environ={},
    )
    whole = image.plan_build(
        ImageSpec(requirements=extra_lock("hf-trainer")),
        base_image=offline_base,
        wheelhouse=framework_wheelhouse,
        project=project,
        environ={},
    )
    assert split.lock == whole.lock == "env/requirements-cpu.lock"
    assert [w.name for w in split.wheels] == [w.name for w in whole.wheels]
    assert split.tag == whole.tag


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_example_image_builds_offline_and_verifies_in_containers(
    example: str,
    offline_env: None,
    verify_example,
    engine: Engine,
    offline_base: str,
    framework_wheelhouse: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`verify` builds the example's image from the offline base and its extra lock, no network in any
    build step (from scratch on a fresh machine, as in CI), then reproduces the example in it."""
    code, data = verify_example(example, "docker")
    assert (code, data["verdict"]) == (0, "identical"), data.get("notes")
    image_id = read_record(data["runs"][0]).image_id
    assert image_id is not None
    labels = engine.inspect_image(image_id).labels
    spec = ImageSpec(requirements=extra_lock(example))
    plan = image.plan_build(spec, base_image=offline_base, wheelhouse=framework_wheelhouse, environ={})
    assert labels["io.reprobox.offline"] == "true"
    digest = "io.reprobox.extra-requirements-digest"
    assert labels[digest] == plan.labels[digest]
    package, _ = EXAMPLES[example]
    versions = json.loads(
        in_image(
            image_id,
            f"import json, torch, {package}; print(json.dumps([torch.__version__, {package}.__version__]))",
        )
    )
    assert versions == ["2.13.0+cpu", image.locked_pins(extra_lock(example))[package]]
    _, outputs = EXAMPLES[example]
    assert set(outputs) <= {checkpoint["path"] for checkpoint in data["checkpoints"]}
    # `reprobox images` names the two runs, and what the example's layer adds over the shared image.
    runs_dir = Path(data["runs"][0]).parents[1]
    capsys.readouterr()
    assert cli.main(["images", "--runs-dir", str(runs_dir), "--json", "-q"]) == 0
    listed = {item["id"]: item for item in json.loads(capsys.readouterr().out)["images"]}[image_id]
    assert listed["shared_image"] == labels["io.reprobox.shared-image"] == plan.shared.tag  # type: ignore[union-attr]
    assert sorted(Path(run).resolve() for run in listed["runs"]) == sorted(
        Path(run).resolve() for run in data["runs"]
    )
    assert sum(listed["jobs"].values()) == 2 and 0 < listed["adds"] < listed["size"] / 2
    claims = data.get("claims") or []  # the examples claim one number each, read after the run
    assert [isinstance(c["value"], float) and c["error"] is None for c in claims] == [True], claims
