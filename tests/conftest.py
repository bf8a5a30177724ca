"""Shared test settings (integration tests run only with --integration: they need a Docker engine) and
the fixtures that run reprobox's commands on the example and test jobs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pytest

JOBS = Path(__file__).parent / "jobs"
ATTESTATION = "reprobox.attestation.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--integration",
        action="store_true",
        default=False,
        help="run integration tests against the real Docker engine (scripts/start-docker.sh starts one)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _skip_gpu_tests_without_a_gpu(items)
    if config.getoption("--integration"):
        return
    skip = pytest.mark.skip(reason="needs a Docker engine: run pytest --integration (after scripts/setup.sh)")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)


def _skip_gpu_tests_without_a_gpu(items: list[pytest.Item]) -> None:
    """Tests marked `gpu` run where torch sees a CUDA device (scripts/gpu-proof.sh runs them there)."""
    marked = [item for item in items if "gpu" in item.keywords]
    if not marked:
        return
    try:
        import torch
    except ImportError:
        reason = "needs an NVIDIA GPU and a CUDA build of torch (torch is not installed)"
    else:
        if torch.cuda.is_available():
            return
        build = f"torch {torch.__version__}" + ("" if torch.version.cuda else ", a build without CUDA")
        reason = f"needs an NVIDIA GPU ({build} sees none); scripts/gpu-proof.sh runs these on one"
    for item in marked:
        item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With pytest-xdist (`scripts/test.sh` runs two workers): every test against the engines (one Docker
    image cache, one Slurm node, one Podman store, and tests that count the containers left) in one
    worker, in order; the other tests go out file by file, so a module's fixture runs once."""
    from xdist.scheduler import LoadScopeScheduling

    class EnginesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "engines" if path.startswith("tests/integration/") else path

    return EnginesTogether(config, log)


VerifyExample = Callable[[str, str], tuple[int, dict[str, Any]]]


@pytest.fixture
def verify_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> VerifyExample:
    """`reprobox verify examples/NAME/job.yaml --runs 2 --runtime RUNTIME --json`: (exit code, JSON)."""
    from reprobox import cli

    def run(example: str, runtime: str) -> tuple[int, dict[str, Any]]:
        code = cli.main(
            [
                "verify",
                str(Path(__file__).parents[1] / "examples" / example / "job.yaml"),
                *("--runs", "2", "--runtime", runtime, "--runs-dir", str(tmp_path / "runs")),
                *("--attestation", str(tmp_path / "reprobox.attestation.json"), "--json", "-q"),
            ]
        )
        data: dict[str, Any] = json.loads(capsys.readouterr().out)
        return code, data

    return run


class VaryJob(Protocol):
    def __call__(
        self, job: str, factors: str, *extra: str, runtime: str = "local"
    ) -> tuple[int, dict[str, Any]]: ...


@pytest.fixture
def vary_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> VaryJob:
    """`reprobox verify tests/jobs/JOB --vary FACTORS --runtime RUNTIME --json [EXTRA...]`: (exit code,
    JSON); the runs go to tmp_path/runs and the attestation to tmp_path, never into tests/jobs."""
    from reprobox import cli

    def run(job: str, factors: str, *extra: str, runtime: str = "local") -> tuple[int, dict[str, Any]]:
        capsys.readouterr()
        code = cli.main(
            [
                "verify",
                str(JOBS / job),
                *("--vary", factors, "--runtime", runtime, "--runs-dir", str(tmp_path / "runs")),
                *("--attestation", str(tmp_path / ATTESTATION), "--json", "-q", *extra),
            ]
        )
        data: dict[str, Any] = json.loads(capsys.readouterr().out)
        return code, data

    return run
