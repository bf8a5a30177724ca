"""`reprobox verify --vary` through the CLI on the docker runtime: on jobs written the way people write
them, the matrix names exactly the factor that matters (each verify of N factors is N + 2 container
runs, so each test varies two or three; test_docker_vary_each_factor.py varies every factor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reprobox.guest.variation import find_libfaketime

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


@pytest.mark.usefixtures("offline_env")
def test_hostname_alone_moves_a_job_seeded_from_it(vary_job) -> None:
    code, data = vary_job("vary-hostname", "hostname,tz", runtime="docker")
    assert code == 1, data
    assert (data["sensitive"], data["invariant"]) == (["hostname"], ["tz"])
    assert factor(data, "hostname")["files"] == ["model.pt"]
    assert data["sentence"].startswith("sensitive to hostname: keep the host name out of outputs and seeds")


@pytest.mark.usefixtures("offline_env")
def test_a_job_that_sorts_its_listing_and_ignores_the_clock_is_invariant(vary_job) -> None:
    if find_libfaketime() is None:
        pytest.skip(
            "varying the clock in a container lends it the host's libfaketime: apt-get install faketime"
        )
    code, data = vary_job("vary-file-order/sorted.yaml", "file-order,time", runtime="docker")
    assert code == 0, data
    assert data["invariant"] == ["file-order", "time"]
