"""`reprobox verify --vary world-size` on the docker runtime: a torchrun job runs in the container with 2
ranks, then 4 (3 container runs). What the matrix concludes from the saved state is the same code on
every runtime (tests/unit/test_variation_world_size.py runs torch jobs of both kinds locally); here, a
job whose ranks share out fixed chunks (NumPy ranks under torchrun) stays invariant while the larger
world really reaches it in its container."""

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
def test_a_job_whose_outputs_do_not_follow_the_ranks_is_invariant_to_world_size_in_containers(
    vary_job,
) -> None:
    code, data = vary_job("vary-world-size/chunks-by-rank.yaml", "world-size", runtime="docker")
    assert code == 0, data
    assert data["runtime"] == "docker" and data["baseline"]["reproducible"]
    assert data["invariant"] == ["world-size"] and data["sentence"] == "invariant to world-size"
    (row,) = data["factors"]
    assert (row["baseline"], row["varied"]) == ("nproc_per_node=2", "nproc_per_node=4")
    varied = read_record(Path(row["run"]))  # four ranks ran: the invariance is not for want of them
    assert varied.data["command"][0] == "torchrun" and "--nproc-per-node=4" in varied.data["command"]
    assert sorted(p.name for p in (varied.run_dir / "outputs" / "ranks").iterdir()) == [
        f"{rank}-of-4" for rank in range(4)
    ]
