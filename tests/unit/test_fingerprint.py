"""The fingerprint: GPUs through a fake NVML, the stack digest, torch left alone, and the CLI entry."""

from __future__ import annotations

import copy
import ctypes.util
import hashlib
import importlib.metadata
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, cast

import pytest
from fakes.fake_nvml import (
    A100_SXM4_80GB,
    A100_SXM4_80GB_MIG,
    H100_SXM5_80GB,
    RTX_4090,
    FakeNVML,
    NVMLError_DriverNotLoaded,
    NVMLError_LibraryNotFound,
    NVMLError_Uninitialized,
)

from reprobox.errors import EnvironmentProblem
from reprobox.guest import fingerprint
from reprobox.guest.fingerprint import (
    FIELDS,
    SCHEMA,
    TORCH_NOT_IMPORTED,
    collect,
    collect_in_new_process,
    cpu_from_cpuinfo,
    field_spec,
    format_table,
    loaded_libraries,
    stack_digest,
)
from reprobox.guest.fingerprint._probes_stack import _nccl_version

torch = pytest.importorskip("torch")


@pytest.fixture
def torch_settings() -> Iterator[None]:
    """Restore the torch switches a test changes, so later tests see the process as it was."""
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    yield
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)


def gpu_fields(fp: dict[str, Any], index: int = 0) -> dict[str, Any]:
    gpus = fp["hardware"]["gpus"]
    assert isinstance(gpus, list), gpus
    gpu: dict[str, Any] = gpus[index]
    return gpu


def test_h100_is_recorded_with_its_numerics_facts_and_nvml_is_shut_down() -> None:
    nvml = FakeNVML(gpus=(H100_SXM5_80GB,))

    fp = collect(nvml=nvml)

    assert fp["schema"] == SCHEMA
    assert fp["hardware"]["nvidia"] == {
        "driver_version": "550.54.15",
        "cuda_driver_version": "12.4",
        "gpu_count": 1,
    }
    gpu = gpu_fields(fp)
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["compute_capability"] == "9.0"
    assert gpu["sm_count"] == 132
    assert gpu["memory_total_bytes"] == 81559 * 2**20
    assert (gpu["mig_mode"], gpu["ecc_mode"], gpu["persistence_mode"]) == ("disabled", "enabled", "enabled")
    assert nvml.calls.count("nvmlInit") == 1
    assert nvml.calls.count("nvmlShutdown") == 1
    assert nvml.initialized == 0


def test_a100_sm_count_comes_from_its_core_count_and_compute_capability() -> None:
    gpu = gpu_fields(collect(nvml=FakeNVML(gpus=(A100_SXM4_80GB,), driver_version="535.161.08")))

    assert (gpu["name"], gpu["compute_capability"], gpu["sm_count"]) == ("NVIDIA A100-SXM4-80GB", "8.0", 108)
    assert "64 cores per SM" in gpu["sm_count_source"]


def test_gpu_uuid_is_stored_only_as_a_short_hash() -> None:
    fp = collect(nvml=FakeNVML(gpus=(H100_SXM5_80GB,)))

    expected = hashlib.sha256(H100_SXM5_80GB.uuid.encode()).hexdigest()[:16]
    assert gpu_fields(fp)["uuid_sha256"] == expected
    assert H100_SXM5_80GB.uuid.lower().removeprefix("gpu-")[:8] not in json.dumps(fp)


def test_unsupported_queries_are_recorded_as_not_supported_and_the_rest_still_collected() -> None:
    gpu = gpu_fields(collect(nvml=FakeNVML(gpus=(RTX_4090,))))

    assert gpu["mig_mode"] == {"absent": "not supported"}
    assert gpu["ecc_mode"] == {"absent": "not supported"}
    assert gpu["persistence_mode"] == "disabled"
    assert (gpu["compute_capability"], gpu["sm_count"]) == ("8.9", 128)


def test_mig_enabled_gpu_records_each_mig_device_sm_count() -> None:
    gpu = gpu_fields(collect(nvml=FakeNVML(gpus=(A100_SXM4_80GB_MIG,))))

    assert gpu["mig_mode"] == "enabled"
    assert gpu["mig_devices"] == [{"sm_count": 42, "memory_mib": 40192}, {"sm_count": 14, "memory_mib": 9856}]


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (NVMLError_LibraryNotFound, "NVML Shared Library Not Found"),
        (NVMLError_DriverNotLoaded, "Driver Not Loaded"),
    ],
)
def test_no_driver_leaves_gpus_absent_and_does_not_shut_down_what_never_started(
    error: type[Exception], reason: str
) -> None:
    nvml = FakeNVML(gpus=(H100_SXM5_80GB,), init_error=error)

    fp = collect(nvml=nvml)

    for key in ("nvidia", "gpus"):
        assert set(fp["hardware"][key]) == {"absent"}
        assert reason in fp["hardware"][key]["absent"]
    assert nvml.calls == ["nvmlInit"]
    assert fp["software"]["python"]["version"] == sys.version.split()[0]


def test_a_query_failing_midway_still_shuts_nvml_down() -> None:
    class CountFails(FakeNVML):
        def nvmlDeviceGetCount(self) -> int:
            raise NVMLError_Uninitialized()

    nvml = CountFails(gpus=(H100_SXM5_80GB,))

    fp = collect(nvml=nvml)

    assert fp["hardware"]["gpus"] == {"absent": "NVMLError_Uninitialized: Uninitialized"}
    assert fp["hardware"]["nvidia"]["driver_version"] == "550.54.15"
    assert nvml.calls[-1] == "nvmlShutdown"
    assert nvml.initialized == 0


def test_real_pynvml_without_a_driver_is_recorded_as_absent() -> None:
    if ctypes.util.find_library("nvidia-ml") is not None:
        pytest.skip("this machine has an NVIDIA driver")

    fp = collect()

    assert "absent" in fp["hardware"]["gpus"]
    assert "NVML" in fp["hardware"]["gpus"]["absent"]


def test_a_failing_proc_read_is_recorded_as_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(path: str) -> str:
        raise PermissionError(f"cannot read {path}")

    monkeypatch.setattr(fingerprint, "_cached_text", unreadable)

    fp = collect(nvml=FakeNVML())

    assert fp["hardware"]["cpu"]["model"] == {"absent": "PermissionError: cannot read /proc/cpuinfo"}
    assert "absent" in fp["hardware"]["memory_total_bytes"]
    assert "absent" in fp["software"]["os"]
    assert fp["hardware"]["gpus"] == []


def test_cpu_flags_keep_only_the_instruction_sets_that_change_numerics() -> None:
    x86 = (
        "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
        "flags\t\t: fpu sse sse2 ssse3 fma cx16 sse4_1 sse4_2 avx f16c avx2 avx512f avx512_bf16\n"
        "\nprocessor\t: 1\nmodel name\t: other\n"
    )
    arm = (
        "processor\t: 0\nFeatures\t: fp asimd evtstrm aes sve sve2 bf16 i8mm\n"
        "CPU implementer\t: 0x41\nCPU part\t: 0xd4f\n"
    )

    assert cpu_from_cpuinfo(x86) == {
        "model": "Intel(R) Xeon(R) Platinum 8480+",
        "flags": ["avx", "avx2", "avx512_bf16", "avx512f", "f16c", "fma"],
    }
    assert cpu_from_cpuinfo(arm) == {
        "model": "implementer 0x41 part 0xd4f",
        "flags": ["asimd", "bf16", "i8mm", "sve", "sve2"],
    }


def test_loaded_cudnn_version_comes_from_the_mapped_file_or_its_wheel() -> None:
    wheel = "/opt/venv/lib/python3.11/site-packages"
    maps = "\n".join(
        [
            "7f00-7f10 r-xp 00000000 08:01 11 /usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7",
            "7f10-7f20 r--p 00010000 08:01 11 /usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7",
            f"7f20-7f30 r-xp 00000000 08:01 12 {wheel}/nvidia/cublas/lib/libcublas.so.12",
            f"7f30-7f40 r-xp 00000000 08:01 13 {wheel}/nvidia/cublas/lib/libcublasLt.so.12",
            "7f40-7f50 r-xp 00000000 08:01 14 /usr/lib/libcudnn_ops_infer.so.8",
            "7f50-7f60 rw-p 00000000 00:00 0 [heap]",
        ]
    )

    found = loaded_libraries(maps, {"nvidia-cublas-cu12": "12.4.5.8", "numpy": "2.1.0"})

    assert found["cudnn"]["version"] == "8.9.7"
    assert found["cudnn"]["version_source"] == "file name"
    assert found["cublas"]["version"] == "12.4.5.8"
    assert found["cublas"]["version_source"] == "distribution nvidia-cublas-cu12"
    assert found["cublasLt"]["version"] == "12.4.5.8"
    assert found["cudart"] == {"absent": "not loaded in this process"}


def test_cuda_13_wheels_in_one_shared_folder_are_named_by_the_wheel_that_ships_each_library() -> None:
    lib = "/opt/venv/lib/python3.11/site-packages/nvidia"
    maps = "\n".join(
        f"7f{i}0-7f{i}8 r-xp 00000000 08:01 {i} {path}"
        for i, path in enumerate(
            [
                f"{lib}/cu13/lib/libcudart.so.13",
                f"{lib}/cu13/lib/libcublas.so.13",
                f"{lib}/cu13/lib/libcublasLt.so.13",
                f"{lib}/cudnn/lib/libcudnn.so.9",
            ]
        )
    )
    wheels = {
        "nvidia-cuda-runtime": "13.0.96",
        "nvidia-cublas": "13.1.1.3",
        "nvidia-cudnn-cu13": "9.20.0.48",
        "nvidia-cuda-nvrtc": "13.0.88",
    }

    found = loaded_libraries(maps, wheels)

    assert {name: entry["version"] for name, entry in found.items()} == {
        "cudart": "13.0.96",
        "cublas": "13.1.1.3",
        "cublasLt": "13.1.1.3",
        "cudnn": "9.20.0.48",
    }
    assert found["cudart"]["version_source"] == "distribution nvidia-cuda-runtime"


def test_nccl_is_named_from_the_library_on_a_machine_without_gpus() -> None:
    """ncclGetVersion needs no device: a CUDA build of torch names its NCCL where CUDA is unavailable."""
    cuda_torch_without_gpu = SimpleNamespace(
        version=SimpleNamespace(cuda="13.0"),
        cuda=SimpleNamespace(is_available=lambda: False, nccl=SimpleNamespace(version=lambda: (2, 29, 7))),
    )
    cpu_torch = SimpleNamespace(version=SimpleNamespace(cuda=None))

    assert _nccl_version(cast(ModuleType, cuda_torch_without_gpu)) == "2.29.7"
    assert _nccl_version(cast(ModuleType, cpu_torch)) == {"absent": "torch is built without CUDA"}


def test_distribution_digest_matches_a_freeze_built_from_package_metadata() -> None:
    seen: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
        seen.setdefault(name, dist.version)
    listing = "\n".join(sorted(f"{name}=={version}" for name, version in seen.items()))

    recorded = collect(nvml=FakeNVML())["software"]["distributions"]

    assert recorded == {"count": len(seen), "sha256": hashlib.sha256(listing.encode()).hexdigest()}


def test_torch_facts_and_flags_in_force_are_recorded(torch_settings: None) -> None:
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_num_threads(1)

    software = collect(nvml=FakeNVML())["software"]

    assert software["torch"]["version"] == torch.__version__
    assert software["torch"]["git_version"] == torch.version.git_version
    assert software["torch"]["cuda"] == torch.version.cuda
    assert software["determinism"]["deterministic_algorithms"] is True
    assert software["determinism"]["deterministic_warn_only"] is True
    assert software["threads"]["torch_intra_op"] == 1
    assert software["precision"]["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    assert software["blas"]["torch"]["blas"]  # torch always reports the BLAS it was built with
    if torch.version.cuda is None:
        assert software["nccl"] == {"absent": "torch is built without CUDA"}


def test_stack_digest_ignores_hostname_memory_and_gpu_identity_but_not_threads() -> None:
    fp = collect(nvml=FakeNVML(gpus=(H100_SXM5_80GB,)))
    assert fp["stack_digest"] == stack_digest(fp)

    elsewhere = copy.deepcopy(fp)
    elsewhere["hardware"]["hostname"] = "another-node"
    elsewhere["hardware"]["memory_total_bytes"] = 2 * 2**40
    elsewhere["hardware"]["gpus"][0]["uuid_sha256"] = "0123456789abcdef"
    elsewhere["hardware"]["gpus"][0]["memory_total_bytes"] = 94 * 2**30
    elsewhere["software"]["python"]["executable"] = "/elsewhere/bin/python"
    elsewhere["software"]["image"] = {"id": "sha256:" + "1" * 64, "digest": None}
    assert stack_digest(elsewhere) == stack_digest(fp)

    more_threads = copy.deepcopy(fp)
    more_threads["software"]["threads"]["OMP_NUM_THREADS"] = "2"
    assert stack_digest(more_threads) != stack_digest(fp)


def test_stack_digest_changes_with_torch_thread_count(torch_settings: None) -> None:
    torch.set_num_threads(1)
    one = collect(nvml=FakeNVML())
    torch.set_num_threads(2)
    two = collect(nvml=FakeNVML())

    assert one["software"]["threads"]["torch_intra_op"] == 1
    assert two["software"]["threads"]["torch_intra_op"] == 2
    assert one["stack_digest"] != two["stack_digest"]


def test_image_comes_from_the_argument_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPROBOX_IMAGE_ID", raising=False)
    monkeypatch.delenv("REPROBOX_IMAGE_DIGEST", raising=False)
    assert "absent" in collect(nvml=FakeNVML())["software"]["image"]

    given = collect(nvml=FakeNVML(), image={"id": "sha256:aa", "digest": "reprobox/job@sha256:bb"})
    assert given["software"]["image"] == {"id": "sha256:aa", "digest": "reprobox/job@sha256:bb"}

    monkeypatch.setenv("REPROBOX_IMAGE_ID", "sha256:cc")
    assert collect(nvml=FakeNVML())["software"]["image"] == {"id": "sha256:cc", "digest": None}


def test_distributed_world_size_and_rank_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("RANK", "3")

    distributed = collect(nvml=FakeNVML())["software"]["distributed"]

    assert distributed == {"world_size": 8, "rank": 3}


def test_field_table_paths_resolve_to_themselves_and_cover_absent_groups() -> None:
    for spec in FIELDS:
        if spec.affects_numerics or not any(o.path.startswith(spec.path + ".") for o in FIELDS):
            assert field_spec(spec.path.replace("[]", "[0]")) == spec
    libraries_absent = field_spec("software.libraries")
    assert libraries_absent is not None
    assert libraries_absent.label == "cuDNN version (loaded)"
    torch_group = field_spec("software.torch")
    assert torch_group is not None
    assert torch_group.label == "torch"
    unlisted_torch_field = field_spec("software.torch.hip")
    assert unlisted_torch_field is not None
    assert unlisted_torch_field.affects_numerics
    library_path = field_spec("software.libraries.cudnn.path")
    assert library_path is not None
    assert not library_path.affects_numerics
    assert field_spec("software.some_future_field") is None


def test_format_table_lists_sections_and_every_gpu_aligned() -> None:
    fp = collect(nvml=FakeNVML(gpus=(H100_SXM5_80GB, A100_SXM4_80GB)))

    table = format_table(fp)

    lines = table.splitlines()
    assert lines[0] == "Hardware"
    assert "Software" in lines
    assert any(line.startswith("  gpu 0 name") and line.endswith("NVIDIA H100 80GB HBM3") for line in lines)
    assert any(line.startswith("  gpu 1 name") and line.endswith("NVIDIA A100-SXM4-80GB") for line in lines)
    rows = [line for line in lines if line.startswith("  ")]
    value_columns = {len(line) - len(line[2:].split("  ", 1)[1].lstrip()) for line in rows}
    assert len(value_columns) == 1, "values start in one column"
    assert lines[-1].split()[-1] == fp["stack_digest"]


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,
        timeout=120,
    )


def test_collect_does_not_import_torch_or_numpy() -> None:
    done = run_python(
        "import json, sys\n"
        "from reprobox.guest.fingerprint import collect\n"
        "fp = collect()\n"
        "print(json.dumps({'loaded': sorted(m for m in ('torch', 'numpy') if m in sys.modules),"
        " 'torch': fp['software']['torch'], 'numpy': fp['software']['numpy']}))\n"
    )

    result = json.loads(done.stdout)
    assert result["loaded"] == []
    assert result["torch"] == {"absent": TORCH_NOT_IMPORTED}
    assert result["numpy"] == {"absent": "numpy not imported by this process"}


def test_module_entry_imports_torch_when_asked_and_prints_json() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reprobox.guest.fingerprint", "--import-torch"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )

    fp = json.loads(done.stdout)
    assert fp["schema"] == SCHEMA
    assert fp["software"]["torch"]["version"] == torch.__version__
    assert fp["software"]["numpy"]["version"] == importlib.metadata.version("numpy")
    assert fp["stack_digest"] == stack_digest(fp)


def test_module_entry_writes_the_output_file(tmp_path: Path) -> None:
    target = tmp_path / "out" / "fingerprint.json"

    done = subprocess.run(
        [sys.executable, "-m", "reprobox.guest.fingerprint", "--output", str(target)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )

    assert done.stdout == ""
    fp = json.loads(target.read_text())
    assert fp["software"]["torch"] == {"absent": TORCH_NOT_IMPORTED}
    assert [p.name for p in target.parent.iterdir()] == ["fingerprint.json"]


def test_module_entry_prints_a_table_when_asked() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reprobox.guest.fingerprint", "--table"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )

    lines = done.stdout.splitlines()
    assert lines[0] == "Hardware"
    assert "Software" in lines
    assert any(line.split()[:2] == ["torch", "absent"] for line in lines)


def test_collect_in_new_process_returns_the_probe_fingerprint() -> None:
    fp = collect_in_new_process(import_torch=False)

    assert fp["schema"] == SCHEMA
    assert fp["software"]["torch"] == {"absent": TORCH_NOT_IMPORTED}
    assert fp["stack_digest"] == stack_digest(fp)


def test_collect_in_new_process_with_a_missing_interpreter_is_an_environment_problem(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-python"

    with pytest.raises(EnvironmentProblem, match="did not finish"):
        collect_in_new_process(python=str(missing), import_torch=False)


def test_module_entry_refuses_a_flag_it_does_not_know_in_one_line() -> None:
    from reprobox.guest.fingerprint.__main__ import Request, parse

    assert parse(["--import-torch", "--output", "f.json"]) == Request(
        import_torch=True, output=Path("f.json")
    )
    assert parse(["--output=x", "--table"]) == Request(table=True, output=Path("x"))
    done = subprocess.run(
        [sys.executable, "-m", "reprobox.guest.fingerprint", "--outptu", "x"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1] == "error: cannot take '--outptu'"
