"""The DDP example under torchrun on the local runtime: bit-identical reruns, and world size explained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reprobox import cli
from reprobox.records.manifest import read_record

pytestmark = pytest.mark.slow  # three torchrun runs of two ranks: about 30 s

EXAMPLE = Path(__file__).parents[2] / "examples" / "ddp"


@pytest.fixture(scope="module")
def two_rank_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    runs_dir = tmp_path_factory.mktemp("ddp-runs")
    attestation = runs_dir / "reprobox.attestation.json"
    arguments = ["verify", str(EXAMPLE / "job.yaml"), "--runtime", "local", "--runs-dir", str(runs_dir)]
    code = cli.main([*arguments, "-q", "--attestation", str(attestation)])
    assert code == 0, "the DDP example did not verify bit-identical with 2 ranks"
    return sorted((runs_dir / "ddp").glob("2*"))


def test_two_ranks_verify_bit_identical_and_record_every_rank(two_rank_runs: list[Path]) -> None:
    assert len(two_rank_runs) == 2
    records = [read_record(run) for run in two_rank_runs]
    assert all(record.succeeded for record in records)
    (first,), (second,) = (record.checkpoints for record in records)
    assert first["path"] == "model.pt" and first["content_sha256"] == second["content_sha256"]
    for record in records:
        assert record.data["command"][:2] == ["torchrun", "--standalone"]
        ranks = record.data["fingerprint"]["ranks"]
        assert {"0", "1"} <= set(ranks)
        assert ranks["1"]["software"]["distributed"] == {"rank": 1, "world_size": 2}
        assert ranks["1"]["hardware"]["hostname"]
        assert record.data["environment"]["NCCL_ALGO"] == "Ring"
        assert record.data["environment"]["NVTE_ALLOW_NONDETERMINISTIC_ALGO"] == "0"


def test_a_different_world_size_is_a_stack_difference(
    two_rank_runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (EXAMPLE / "job.yaml").read_text().replace("nproc_per_node: 2", "nproc_per_node: 1")
    job = tmp_path / "job.yaml"
    job.write_text(text + f"code: {EXAMPLE}\n")
    runs_dir = tmp_path / "runs"
    assert cli.main(["run", str(job), "--runtime", "local", "--runs-dir", str(runs_dir), "-q"]) == 0
    (one_rank,) = sorted((runs_dir / "ddp").glob("2*"))
    capsys.readouterr()
    assert cli.main(["compare", str(two_rank_runs[0]), str(one_rank), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "different"
    explanation = result["explanation"]
    assert explanation["same_stack"] is False
    stack_fields = {f["field"] for f in explanation["fields"] if f["affects_numerics"]}
    assert "software.distributed.world_size" in stack_fields
