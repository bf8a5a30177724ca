"""The DDP example in the real image: torchrun is there, 2 gloo ranks agree, reruns are bit-identical."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reprobox.compare import IDENTICAL
from reprobox.engine import Engine
from reprobox.image import MANAGED_LABEL
from reprobox.jobfile import load_job
from reprobox.runner import RunOptions
from reprobox.runtimes.docker import DockerRuntime
from reprobox.verify import VerifyOptions, verify

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "examples" / "ddp" / "job.yaml"


def test_ddp_example_verifies_bit_identical_in_containers(
    engine: Engine, built_image: Any, created: Any, tmp_path: Path, containers_added
) -> None:
    job = load_job(EXAMPLE)
    # the engine may hold containers from earlier sessions; this test must add none
    containers_before = set(engine.list_containers([MANAGED_LABEL]))
    runtime = DockerRuntime(built_image.info, engine=engine)
    comparison, records = verify(job, runtime, RunOptions(runs_dir=tmp_path), VerifyOptions(runs=2))
    created.run_ids.extend(record.data["run_id"] for record in records)
    assert comparison.verdict == IDENTICAL, [record.failure for record in records]
    assert len(records) == 2
    for record in records:
        assert record.succeeded, record.failure
        assert record.data["command"][0] == "torchrun"  # the image's own torchrun, on its PATH
        assert record.data["runtime"]["container"]["network_mode"] == "none"
        ranks = record.data["fingerprint"]["ranks"]
        assert ranks["1"]["software"]["distributed"] == {"rank": 1, "world_size": 2}
        assert ranks["1"]["software"]["image"]["id"] == built_image.info.id
        log = (record.run_dir / "stdout.log").read_text()
        assert "world size 2" in log
    assert not (left := containers_added(engine, containers_before)), left
