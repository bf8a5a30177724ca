"""`reprobox verify --vary world-size` on the docker runtime: torchrun jobs run in the container with 2
ranks, then 4, and the matrix says whether the saved state moved (each verify is 3 container runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobox.records.manifest import read_record

pytestmark = pytest.mark.integration


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch, offline_base: str, wheelhouse: Path) -> None:
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))


@pytest.mark.usefixtures("offline_env")
def test_a_sampler_sharded_job_is_sensitive_to_world_size_in_containers(vary_job) -> None:
    code, data = vary_job("vary-world-size/job.yaml", "world-size", runtime="docker")
    assert code == 1, data
    assert data["runtime"] == "docker" and data["baseline"]["reproducible"]
    assert data["sensitive"] == ["world-size"]
    (row,) = data["factors"]
    assert (row["baseline"], row["varied"]) == ("nproc_per_node=2", "nproc_per_node=4")
    assert row["only_in_varied"] == ["rank-2.json", "rank-3.json"]
    assert "model.pt" in row["files"] and sorted(row["tensors"]) == ["bias", "weight"]
    assert data["sentence"].startswith("sensitive to world-size: pin `launcher.nproc_per_node: 2`")
    varied = read_record(Path(row["run"]))
    assert varied.data["command"][0] == "torchrun" and "--nproc-per-node=4" in varied.data["command"]
    assert varied.data["fingerprint"]["ranks"]["3"]["software"]["distributed"] == {"rank": 3, "world_size": 4}


@pytest.mark.usefixtures("offline_env")
def test_a_job_that_gathers_in_a_fixed_order_is_invariant_to_world_size_in_containers(vary_job) -> None:
    code, data = vary_job("vary-world-size/invariant.yaml", "world-size", runtime="docker")
    assert code == 0, data
    assert data["invariant"] == ["world-size"]
