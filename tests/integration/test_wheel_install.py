"""reprobox installed like any Python tool: a wheel built from this checkout, installed into a fresh
virtual environment, verifies a job in containers from a folder with no checkout of reprobox, against
the real engine, and names the same image as the checkout does. Installed as the README says (``pipx
install``, ``uv tool install``, nothing injected), it verifies a torch job bit-identical on the local
runtime, with torch only in the user's own environment on PATH, and in containers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli, image
from reprobox.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
LEAVE_OUT = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "REPROBOX_RUNS_DIR"}
PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation")
JOB = """\
version: 1
name: from-wheel
command: [python, train.py]
checkpoints: ["*.pt"]
"""
TRAIN = """\
import os

import torch

model = torch.nn.Linear(8, 2)
inputs, targets = torch.randn(16, 8), torch.randn(16, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(inputs), targets).backward()
    optimizer.step()
torch.save(model.state_dict(), os.path.join(os.environ["REPROBOX_OUTPUT_DIR"], "model.pt"))
"""

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One wheel of this checkout, shared by every install below."""
    dist = tmp_path_factory.mktemp("dist")
    succeed(*PIP_WHEEL, "-w", dist, ROOT)
    (built,) = dist.glob("reprobox-*.whl")
    return built


@pytest.fixture(scope="module")
def installers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pipx and uv, from PyPI, in a virtual environment of their own (their scripts in its bin/)."""
    venv = tmp_path_factory.mktemp("installers")
    succeed(sys.executable, "-m", "venv", "--without-pip", venv)
    succeed(sys.executable, "-m", "pip", "--python", venv / "bin/python", "install", "--quiet", "pipx", "uv")
    return venv / "bin"


@pytest.fixture(scope="module")
def user_env(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    """The user's own environment for the job: torch (from the wheelhouse) and no reprobox."""
    venv = tmp_path_factory.mktemp("user-venv")
    succeed(sys.executable, "-m", "venv", "--without-pip", venv)
    succeed(
        *(sys.executable, "-m", "pip", "--python", venv / "bin/python", "install", "--quiet"),
        *("--no-index", "--find-links", wheelhouse, "torch"),
    )
    return venv / "bin"


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A tiny job of its own, in a folder far from the checkout (the image has torch)."""
    folder = tmp_path / "my-training-repo"
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN)
    (folder / "job.yaml").write_text(JOB)
    return folder / "job.yaml"


def test_wheel_in_a_fresh_venv_verifies_in_containers(
    tmp_path: Path,
    wheel: Path,
    job: Path,
    offline_base: str,
    wheelhouse: Path,
    engine: Engine,
    created: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The checkout's build of the same job right after the wheel's, so both read the same sources; an
    # image it had to build is removed at the end of the session.
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))
    tag = image.plan_build().tag  # the job has no image: section
    if not engine.image_exists(tag):
        created.images.append(tag)
    assert cli.main(["build", str(job), "--json", "-q"]) == 0
    checkout = json.loads(capsys.readouterr().out)
    assert tag in checkout["tags"]

    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in LEAVE_OUT}  # nothing that points at this tree
    env["PATH"] = os.pathsep.join(
        [str(venv / "bin"), *(p for p in env["PATH"].split(os.pathsep) if not p.startswith(sys.prefix))]
    )
    # A bare venv, filled by this pip (`--python`): ensurepip would add seconds and nothing to test.
    succeed(sys.executable, "-m", "venv", "--without-pip", venv)
    succeed(
        sys.executable, "-m", "pip", "--python", venv / "bin/python", "install", "--quiet", wheel, env=env
    )

    def in_venv(*command: str | Path) -> subprocess.CompletedProcess[str]:
        """A command from the job's folder, with the venv first on PATH and nothing of this checkout."""
        return subprocess.run(command, cwd=job.parent, env=env, capture_output=True, text=True, check=False)

    def reprobox(*args: str) -> subprocess.CompletedProcess[str]:
        return in_venv(venv / "bin/reprobox", *args)

    where = in_venv(
        venv / "bin/python", "-c", "from reprobox import image; print(image.project_files().root)"
    )
    assert where.returncode == 0, where.stderr[-3000:]
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout  # the wheel's files, not ours

    built = reprobox("build", "job.yaml", "--json")
    assert built.returncode == 0, built.stderr[-3000:]
    assert tag in json.loads(built.stdout)["tags"]
    assert "no build needed" in built.stderr

    verified = reprobox("verify", "job.yaml", "--runtime", "docker", "--runs", "2", "--json")
    assert verified.returncode == 0, verified.stderr[-3000:]
    data = json.loads(verified.stdout)
    assert data["verdict"] == "identical"
    assert data["grade"] == "bit-identical", data["sentence"]
    (checkpoint,) = data["checkpoints"]
    assert checkpoint["path"] == "model.pt" and checkpoint["identical"]
    assert all(Path(run).is_relative_to(job.parent / "runs") for run in data["runs"])
    # `reprobox lock` from the wheel alone: a job's extra package locked against the image's own lock,
    # offline from the wheelhouse (tqdm is one of the examples' wheels there)
    (job.parent / "requirements.in").write_text("tqdm\n")
    locked = reprobox(
        *("lock", "requirements.in", "-o", "requirements.lock", "--base", "cpu"),
        *("--no-index", "--find-links", str(wheelhouse)),
    )
    assert locked.returncode == 0, locked.stderr[-3000:]
    lock = (job.parent / "requirements.lock").read_text()
    assert "tqdm==" in lock and "--hash=sha256:" in lock and "torch==" not in lock
    # The controller compared file bytes alone: the fresh venv has no torch.
    no_torch = in_venv(venv / "bin/python", "-c", "import importlib.util as u; print(u.find_spec('torch'))")
    assert no_torch.stdout.strip() == "None", no_torch.stdout


INSTALLS = {  # the README's commands, each tool's homes in the test's own folders
    "pipx": lambda bin_dir, wheel: [bin_dir / "pipx", "install", "--python", sys.executable, wheel],
    "uv": lambda bin_dir, wheel: [bin_dir / "uv", "tool", "install", "--python", sys.executable, wheel],
}


@pytest.mark.parametrize("installer", list(INSTALLS))
def test_a_tool_install_verifies_a_torch_job_bit_identical_locally_and_in_containers(
    tmp_path: Path,
    installer: str,
    wheel: Path,
    installers: Path,
    user_env: Path,
    job: Path,
    offline_base: str,
    wheelhouse: Path,
    engine: Engine,
    created: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))
    tag = image.plan_build().tag  # what the tool builds below: the checkout's image, by its content
    if not engine.image_exists(tag):
        created.images.append(tag)
    homes = tmp_path / "homes"
    tool_bin = homes / "bin"
    base = {k: v for k, v in os.environ.items() if k not in LEAVE_OUT}
    rest = [p for p in base["PATH"].split(os.pathsep) if not p.startswith(sys.prefix)]
    env = {
        **base,
        "HOME": str(homes / "home"),
        "PIPX_HOME": str(homes / "pipx"),
        "PIPX_BIN_DIR": str(tool_bin),
        "UV_TOOL_DIR": str(homes / "uv-tools"),
        "UV_TOOL_BIN_DIR": str(tool_bin),
        "UV_CACHE_DIR": str(homes / "uv-cache"),
        # the user's shell: their own environment (torch, no reprobox) first, the tool's command after
        "PATH": os.pathsep.join([str(user_env), str(tool_bin), *rest]),
    }
    (homes / "home").mkdir(parents=True)
    succeed(*INSTALLS[installer](installers, wheel), env=env)
    reprobox = tool_bin / "reprobox"
    assert reprobox.exists(), sorted(p.name for p in tool_bin.iterdir())

    def verify(runtime: str) -> dict[str, Any]:
        done = subprocess.run(
            [reprobox, "verify", "job.yaml", "--runtime", runtime, "--runs", "2", "--json"],
            cwd=job.parent,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"{runtime}: {done.stderr[-3000:]}"
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    # the offline base from the tool's own recipe (it ships in the wheel): here it exists already
    succeed(reprobox, "offline-base", "--tag", offline_base, env=env)
    succeed(reprobox, "build", str(job), "-q", env=env)
    for runtime in ("local", "docker"):
        data = verify(runtime)
        assert data["grade"] == "bit-identical", (runtime, data["sentence"])
        (checkpoint,) = data["checkpoints"]
        assert checkpoint["path"] == "model.pt" and checkpoint["identical"], runtime
    # nothing was injected: the tool's own environment still has no torch
    tool_python = Path(os.path.realpath(reprobox)).parent / "python"
    probe = subprocess.run(
        [tool_python, "-c", "import importlib.util as u; print(u.find_spec('torch'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.stdout.strip() == "None", probe.stdout + probe.stderr


def succeed(*command: str | Path, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
