"""`reprobox verify --vary` through the CLI on the docker runtime: on a job written the way people write
them, the matrix names exactly the factor that matters, and pins the thread count torch picked in the
container. test_docker_vary_each_factor.py shows every factor reaching its job in the container alone
(and leaving the rest of what it saved unchanged); the blame for each kind of job is the same code on
every runtime, tried on the local runtime in tests/unit/test_variation_local.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch, offline_base: str, wheelhouse: Path) -> None:
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))


def factor(data: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(row for row in data["factors"] if row["factor"] == name)
    return found


@pytest.mark.usefixtures("offline_env")
def test_threads_alone_moves_a_thread_sensitive_job(vary_job) -> None:
    code, data = vary_job("vary-threads", "threads,hostname", runtime="docker")
    assert code == 1, data
    assert data["baseline"]["reproducible"]
    assert (data["sensitive"], data["invariant"]) == (["threads"], ["hostname"])
    assert factor(data, "threads")["files"] == ["model.pt"] and factor(data, "threads")["tensors"]
    used = factor(data, "threads")["baseline"].removeprefix("threads=")  # what torch picked in the container
    assert data["sentence"].startswith(f"sensitive to threads: pin `determinism.threads: {used}`")
