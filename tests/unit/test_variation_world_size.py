"""verify --vary world-size on real torchrun jobs (2 vs 4 gloo ranks, local runtime), and the matrix's
handling of what only one world size writes or survives."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobox import attest
from reprobox.compare import DIFFERENT, Comparison
from reprobox.forensics.variation import SENSITIVE, FactorResult, VariationResult
from reprobox.forensics.variation.change import Machine
from reprobox.forensics.variation.factors import BY_NAME
from reprobox.forensics.variation.matrix import FAILED_RUN, judge
from reprobox.jobfile import JobSpec
from reprobox.jobfile.schema import Launcher
from reprobox.records.manifest import read_record
from reprobox.render.variation import matrix_text


def torchrun_machine(tmp_path: Path, nproc: int, nnodes: int = 1) -> Machine:
    job = JobSpec(job_file=tmp_path / "job.yaml", name="j", command=("python", "t.py"), code=tmp_path)
    launcher = Launcher(type="torchrun", nproc_per_node=nproc, nnodes=nnodes)
    return Machine(job=job.with_overrides(launcher=launcher), cpus=2)


def test_world_size_doubles_the_processes_and_its_pin_names_the_authors_value(tmp_path: Path) -> None:
    factor = BY_NAME["world-size"]
    m = torchrun_machine(tmp_path, 3, nnodes=2)
    assert factor.unsupported_reason(m, "local", frozenset()) is None
    assert (factor.baseline(m), factor.varied(m).describe()) == (
        "nproc_per_node=3",
        "nproc_per_node=6",
    )
    assert factor.pin(m) == (
        "pin `launcher.nproc_per_node: 3` in the job file (the author's world size was 6)"
    )
    assert "files the job writes" in factor.doc


def test_files_only_one_world_size_writes_are_named_as_what_changed() -> None:
    compared = Comparison(
        DIFFERENT,
        ["baseline", "varied"],
        one_sided=[
            {"checkpoint": "rank-3.pt", "run": "varied"},
            {"checkpoint": "rank-2.pt", "run": "varied"},
            {"checkpoint": "old.pt", "run": "baseline"},
        ],
        notes=["checkpoint rank-3.pt exists only in varied"],
    )
    row = judge(FactorResult("world-size", "", "n vs 2n"), compared)
    assert row.status == SENSITIVE
    assert (row.only_varied, row.only_baseline) == (["rank-2.pt", "rank-3.pt"], ["old.pt"])
    assert row.files == ["old.pt", "rank-2.pt", "rank-3.pt"] and row.tensors == []
    assert row.note.startswith("bytes, not tensors")
    assert row.to_json()["only_in_varied"] == ["rank-2.pt", "rank-3.pt"]
    assert "only the varied run wrote: rank-2.pt, rank-3.pt" in matrix_text(
        VariationResult(["a", "b"], Comparison("identical", ["a", "b"]), [row], runtime="local")
    )


def test_the_same_name_changing_in_several_files_is_listed_once() -> None:
    compared = Comparison(
        DIFFERENT,
        ["baseline", "varied"],
        value_differences=[
            {"checkpoint": "rank-0.json", "name": "samples", "a": [0], "b": [1]},
            {"checkpoint": "rank-1.json", "name": "samples", "a": [1], "b": [2]},
        ],
    )
    row = judge(FactorResult("world-size", "", ""), compared)
    assert (row.files, row.values_changed) == (["rank-0.json", "rank-1.json"], ["samples"])


def world_sizes(run: str) -> tuple[list[str], int]:
    """The ranks the run's fingerprint recorded, and the world size rank 0 saw."""
    fingerprint = read_record(Path(run)).data["fingerprint"]
    return sorted(fingerprint["ranks"]), fingerprint["software"]["distributed"]["world_size"]


@pytest.mark.slow  # three torchrun runs of 2, 2 and 4 ranks: about 35 s
def test_a_job_sharded_by_its_sampler_is_sensitive_to_world_size(vary_job) -> None:
    code, data = vary_job("vary-world-size/job.yaml", "world-size")
    assert code == 1, data
    assert data["baseline"]["reproducible"] and data["sensitive"] == ["world-size"]
    (row,) = data["factors"]
    assert (row["baseline"], row["varied"]) == ("nproc_per_node=2", "nproc_per_node=4")
    assert row["files"] == ["model.pt", "rank-0.json", "rank-1.json", "rank-2.json", "rank-3.json"]
    assert row["only_in_varied"] == ["rank-2.json", "rank-3.json"] and row["only_in_baseline"] == []
    assert sorted(row["tensors"]) == ["bias", "weight"] and row["max_abs"] > 0
    assert row["values_changed"] == ["samples"]
    assert data["sentence"] == (
        "sensitive to world-size: pin `launcher.nproc_per_node: 2` in the job file "
        "(the author's world size was 2)"
    )
    assert world_sizes(data["baseline"]["runs"][0]) == (["0", "1"], 2)
    assert world_sizes(row["run"]) == (["0", "1", "2", "3"], 4)  # the varied run really had 4 ranks
    attestation = attest.read_attestation(Path(data["attestation"]))
    assert attestation.factors_with_status("sensitive") == ["world-size"]
    assert (attestation.variation or {})["factors"][0]["only_in_varied"] == ["rank-2.json", "rank-3.json"]


@pytest.mark.slow  # three torchrun runs of 2, 2 and 4 ranks: about 30 s
def test_a_job_that_gathers_and_sums_in_a_fixed_order_is_invariant_to_world_size(vary_job) -> None:
    code, data = vary_job("vary-world-size/invariant.yaml", "world-size")
    assert code == 0, data
    assert data["invariant"] == ["world-size"] and data["sentence"] == "invariant to world-size"
    assert world_sizes(data["factors"][0]["run"]) == (["0", "1", "2", "3"], 4)
    assert attest.read_attestation(Path(data["attestation"])).factors_with_status("invariant") == [
        "world-size"
    ]


@pytest.mark.slow  # two torchrun runs of 2 ranks, and 4 ranks that stop at once (NumPy ranks, no torch)
def test_a_job_that_fails_only_at_the_larger_world_size_says_so_and_does_not_pass(vary_job) -> None:
    code, data = vary_job("vary-world-size/two-ranks-only.yaml", "world-size")
    assert code == 3, data  # a run failed: not 0, and not blamed as sensitive either
    assert data["baseline"]["reproducible"] and data["failed"] == ["world-size"]
    (row,) = data["factors"]
    assert row["status"] == FAILED_RUN and row["reason"].endswith("failed: exited with status 1")
    assert data["sentence"].startswith("the varied run failed for world-size (nproc_per_node=4; run ")
    log = (Path(row["run"]) / "stdout.log").read_text()
    assert "this job needs world size 2, not 4" in log
