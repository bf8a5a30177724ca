"""Every CUDA path reprobox has, proved on a real GPU through the local runtime (skipped without one).

Each test runs a real job (tests/jobs/gpu-*) with `reprobox run` or `verify` on the GPU and reads what
it recorded: the seeding and flags the job saw, the NVML fingerprint, the trail's on-device checksum,
the failure sentence of an op with no deterministic CUDA kernel, the atomics that `verify` catches and
the drill-down names, and a CPU run told apart from a GPU run by its stack.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli
from reprobox.forensics.drilldown._cause import CUDA_ATOMIC_STEMS
from reprobox.records.manifest import read_record
from reprobox.runner import list_runs

pytestmark = pytest.mark.gpu

JOBS = Path(__file__).parents[1] / "jobs"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli.main([*args, "--json", "-q"])
    return code, json.loads(capsys.readouterr().out)


def job_copy(tmp_path: Path, name: str, determinism: str = "") -> Path:
    """A copy of tests/jobs/NAME, with a determinism: section appended to its job file."""
    job = tmp_path / name
    shutil.copytree(JOBS / name, job)
    if determinism:
        with (job / "job.yaml").open("a") as handle:
            handle.write(f"determinism:\n{determinism}")
    return job


def probe(tmp_path: Path, capsys: pytest.CaptureFixture[str], determinism: str = "") -> dict[str, Any]:
    job = job_copy(tmp_path, "gpu-probe", determinism)
    code, data = run_json(capsys, "run", str(job), "--runtime", "local", "--runs-dir", str(tmp_path / "runs"))
    assert code == 0, data.get("failure")
    seen: dict[str, Any] = json.loads((Path(data["run_dir"]) / "outputs" / "seen.json").read_text())
    return seen


def test_every_cuda_generator_is_seeded_before_the_job_runs(tmp_path: Path, capsys) -> None:
    import torch

    seen = probe(tmp_path, capsys)
    count = torch.cuda.device_count()
    assert seen["device_count"] == count
    assert seen["initial_seeds"] == [1234] * count
    torch.manual_seed(1234)  # the same Philox stream on the same device
    assert seen["draws"] == [torch.rand(4, device=f"cuda:{i}").tolist() for i in range(count)]


def test_cublas_workspace_is_set_before_cuda_initialises(tmp_path: Path, capsys) -> None:
    """The startup hook leaves CUDA uninitialised, the variable is in place, and a float32 matmul runs
    under torch.use_deterministic_algorithms(True) (without the variable torch raises there)."""
    seen = probe(tmp_path, capsys)
    assert seen["cuda_initialized_at_start"] is False
    assert seen["cublas_workspace_config"] == ":4096:8"
    assert seen["deterministic_algorithms"] is True
    assert isinstance(seen["matmul_sum"], float)
    small = probe(tmp_path / "small", capsys, '  cublas_workspace_config: ":16:8"\n')
    assert small["cublas_workspace_config"] == ":16:8" and isinstance(small["matmul_sum"], float)


def test_cudnn_and_tf32_flags_as_the_job_sees_them(tmp_path: Path, capsys) -> None:
    seen = probe(tmp_path, capsys)
    assert (seen["cudnn_deterministic"], seen["cudnn_benchmark"]) == (True, False)
    assert (seen["matmul_allow_tf32"], seen["cudnn_allow_tf32"]) == (False, False)
    assert seen["float32_matmul_precision"] == "highest"
    assert isinstance(seen["conv_sum"], float)
    fast = probe(
        tmp_path / "fast", capsys, "  tf32: true\n  cudnn_benchmark: true\n  sdpa_backends: [math]\n"
    )
    assert (fast["matmul_allow_tf32"], fast["cudnn_allow_tf32"], fast["cudnn_benchmark"]) == (True,) * 3
    assert fast["sdpa"] == {"flash": False, "efficient": False, "math": True}


def test_an_op_without_a_deterministic_cuda_kernel_fails_with_the_fix(tmp_path: Path, capsys) -> None:
    code, data = run_json(
        capsys, "run", str(JOBS / "gpu-histc"), "--runtime", "local", "--runs-dir", str(tmp_path)
    )
    assert code == 3
    failure = read_record(data["run_dir"]).failure or ""
    line = next(
        i
        for i, text in enumerate((JOBS / "gpu-histc" / "train.py").read_text().splitlines(), 1)
        if "histc(" in text
    )
    assert "histc" in failure and f"train.py:{line}" in failure and "warn_only" in failure, failure


def test_atomics_are_caught_by_verify_and_named_by_the_drill_down(tmp_path: Path, capsys) -> None:
    code, data = run_json(
        capsys,
        "verify",
        str(JOBS / "gpu-atomics"),
        *("--runtime", "local", "--runs-dir", str(tmp_path / "runs"), "--no-attestation"),
    )
    assert code == 1 and data["verdict"] == "different", data.get("sentence")
    assert data["explanation"]["same_stack"] is True  # a real nondeterminism, not another stack
    operation = data["first_divergence"]["operation"]
    # the forward's index_add_ or, where those sums agreed, the backward's scatter of the gradients
    assert operation["name"].partition("::")[2].startswith(CUDA_ATOMIC_STEMS), operation
    assert operation["cause"] == "operation" and operation["phase"] in ("forward", "backward")
    assert "atomic" in operation["sentence"], operation["sentence"]


def test_nvml_fingerprint_has_the_real_gpu(tmp_path: Path, capsys) -> None:
    import pynvml
    import torch

    code, data = run_json(
        capsys, "run", str(JOBS / "gpu-probe"), "--runtime", "local", "--runs-dir", str(tmp_path)
    )
    assert code == 0
    fingerprint = read_record(data["run_dir"]).fingerprint
    gpus = fingerprint["hardware"]["gpus"]
    assert len(gpus) == torch.cuda.device_count() >= 1
    properties = torch.cuda.get_device_properties(0)
    first = gpus[0]
    assert first["name"] == torch.cuda.get_device_name(0)
    assert first["compute_capability"] == "{}.{}".format(*torch.cuda.get_device_capability(0))
    assert first["sm_count"] == properties.multi_processor_count
    assert abs(first["memory_total_bytes"] - properties.total_memory) < 0.05 * properties.total_memory
    pynvml.nvmlInit()
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
    finally:
        pynvml.nvmlShutdown()
    driver = driver.decode() if isinstance(driver, bytes) else driver
    assert fingerprint["hardware"]["nvidia"]["driver_version"] == driver
    assert fingerprint["software"]["torch"]["compute_device"] == "cuda"
    assert fingerprint["software"]["torch"]["cuda"] == torch.version.cuda


def test_the_trail_checksum_on_the_device_agrees_across_runs(tmp_path: Path, capsys) -> None:
    code, data = run_json(
        capsys,
        "verify",
        str(JOBS / "gpu-conv"),
        *("--runtime", "local", "--runs-dir", str(tmp_path / "runs"), "--trail", "1", "--no-attestation"),
    )
    assert code == 0 and data["verdict"] == "identical", data.get("sentence")
    trail = (Path(data["runs"][0]) / "trail.jsonl").read_text().splitlines()
    steps = [json.loads(line) for line in trail if '"params"' in line]
    assert len(steps) == 32  # two epochs of 16 batches
    digests = [digest for step in steps for digest, *_ in step["params"].values()]
    assert all(d.startswith("dev:") for d in digests), digests[:3]


def test_a_cpu_run_and_a_gpu_run_are_told_apart_by_their_stack(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    args = ("run", str(JOBS / "gpu-conv"), "--runtime", "local", "--runs-dir", str(runs))
    assert run_json(capsys, *args)[0] == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the same job, the same machine, on its CPU
    assert run_json(capsys, *args)[0] == 0
    gpu_run, cpu_run = list_runs(runs, "gpu-conv")
    code, data = run_json(capsys, "compare", str(gpu_run), str(cpu_run))
    assert code == 1 and data["verdict"] == "different"
    explanation = data["explanation"]
    assert explanation["same_stack"] is False and explanation["same_inputs"] is True
    fields = {field["field"]: field for field in explanation["fields"]}
    assert (fields["software.torch.compute_device"]["a"], fields["software.torch.compute_device"]["b"]) == (
        "cuda",
        "cpu",
    )
    assert "compute device" in explanation["sentence"], explanation["sentence"]
