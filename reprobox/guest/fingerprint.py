"""Fingerprint the machine and the numerical stack a job runs on, without changing either.

Every probe is optional: one that fails is recorded as ``{"absent": "<reason>"}`` in its place, so a
fingerprint is always produced. ``collect`` never imports torch or numpy: it probes them only when the
process has already imported them (inside the job at exit), and a separate probe process asks for them
on purpose (``python -m reprobox.guest.fingerprint --import-torch``).

``FIELDS`` is the one table of which fields change numerics, how they are named to a person and in
which order a difference is worth naming; ``stack_digest`` hashes exactly those fields and
``reprobox.explain`` ranks differences by the same table.

Decisions recorded in ``FIELDS``: the container image id and digest are *not* numerics fields, because
they change with every rebuild even when the content is identical; the parts of an image that change
numerics (torch, the cuDNN/cuBLAS actually loaded, BLAS, numpy, the OS release, the installed Python
distributions) are probed directly and are. Hostname, memory sizes, core counts, paths, ECC and
persistence modes, the GPU UUID hash and the rank of this process are recorded but are not.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import importlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final, TypeGuard

from reprobox.errors import EnvironmentProblem

SCHEMA: Final = "reprobox.fingerprint/1"
TORCH_NOT_IMPORTED: Final = "torch not imported by this process"
NUMPY_NOT_IMPORTED: Final = "numpy not imported by this process"


@dataclass(frozen=True)
class FieldSpec:
    """One fingerprint field: its dotted path (``[]`` stands for every list index), the words a person
    reads for it, the order in which a difference in it is named (lower first), and whether it can
    change the numbers a job computes. A path also covers everything recorded below it."""

    path: str
    label: str
    rank: int
    affects_numerics: bool = True


FIELDS: Final[tuple[FieldSpec, ...]] = (
    # GPU hardware: a different chip or partition runs different kernels.
    FieldSpec("hardware.nvidia.gpu_count", "GPU count", 10),
    FieldSpec("hardware.gpus", "GPUs", 11),
    FieldSpec("hardware.gpus[].name", "GPU model", 11),
    FieldSpec("hardware.gpus[].compute_capability", "GPU compute capability", 12),
    FieldSpec("hardware.gpus[].sm_count", "GPU SM count", 13),
    FieldSpec("hardware.gpus[].mig_mode", "GPU MIG mode", 14),
    FieldSpec("hardware.gpus[].mig_devices", "MIG slice sizes", 15),
    # GPU libraries, as loaded: cuDNN, cuBLAS and NCCL pick algorithms by version.
    FieldSpec("software.libraries.cudnn.version", "cuDNN version (loaded)", 20),
    FieldSpec("software.torch.cudnn", "cuDNN version (torch)", 21),
    FieldSpec("software.libraries.cublas.version", "cuBLAS version (loaded)", 22),
    FieldSpec("software.libraries.cublasLt.version", "cuBLASLt version (loaded)", 23),
    FieldSpec("software.nccl", "NCCL version", 24),
    FieldSpec("software.libraries.cudart.version", "CUDA runtime (loaded)", 25),
    FieldSpec("software.torch", "torch", 30),
    FieldSpec("software.torch.version", "torch version", 30),
    FieldSpec("software.torch.git_version", "torch build (git hash)", 31),
    FieldSpec("software.torch.cuda", "CUDA runtime (torch)", 32),
    FieldSpec("hardware.nvidia", "NVIDIA driver", 33),
    FieldSpec("hardware.nvidia.driver_version", "NVIDIA driver version", 33),
    FieldSpec("hardware.nvidia.cuda_driver_version", "CUDA driver version", 34),
    # CPU math: BLAS library and the instruction set its kernels dispatch on.
    FieldSpec("software.blas.torch", "BLAS (torch)", 40),
    FieldSpec("software.blas.numpy", "BLAS (numpy)", 41),
    FieldSpec("software.torch.cpu_capability", "torch CPU kernel level", 42),
    FieldSpec("hardware.cpu.model", "CPU model", 43),
    FieldSpec("hardware.cpu.flags", "CPU ISA flags", 44),
    FieldSpec("hardware.cpu.architecture", "CPU architecture", 45),
    # Threads: reductions split differently with a different thread count.
    FieldSpec("software.threads.torch_intra_op", "torch intra-op threads", 50),
    FieldSpec("software.threads.torch_inter_op", "torch inter-op threads", 51),
    FieldSpec("software.threads.OMP_NUM_THREADS", "OMP_NUM_THREADS", 52),
    FieldSpec("software.threads.MKL_NUM_THREADS", "MKL_NUM_THREADS", 53),
    FieldSpec("software.threads.OPENBLAS_NUM_THREADS", "OPENBLAS_NUM_THREADS", 54),
    # Determinism and precision switches in force.
    FieldSpec("software.determinism", "determinism flags", 60),
    FieldSpec("software.determinism.deterministic_algorithms", "deterministic algorithms", 60),
    FieldSpec("software.determinism.deterministic_warn_only", "deterministic algorithms warn-only", 61),
    FieldSpec("software.determinism.cudnn_deterministic", "cudnn.deterministic", 62),
    FieldSpec("software.determinism.cudnn_benchmark", "cudnn.benchmark", 63),
    FieldSpec("software.determinism.cudnn_enabled", "cudnn.enabled", 64),
    FieldSpec("software.determinism.mkldnn_enabled", "mkldnn.enabled", 65),
    FieldSpec("software.determinism.fill_uninitialized_memory", "fill_uninitialized_memory", 66),
    FieldSpec("software.precision", "TF32 and reduced-precision flags", 70),
    FieldSpec("software.precision.matmul_allow_tf32", "TF32 in matmul", 70),
    FieldSpec("software.precision.cudnn_allow_tf32", "TF32 in cuDNN", 71),
    FieldSpec("software.precision.float32_matmul_precision", "float32 matmul precision", 72),
    FieldSpec("software.precision.fp32_precision", "fp32_precision", 73),
    FieldSpec("software.precision.matmul_allow_fp16_reduced_precision", "fp16 reduced-precision matmul", 74),
    FieldSpec("software.precision.matmul_allow_bf16_reduced_precision", "bf16 reduced-precision matmul", 75),
    FieldSpec("software.environment.CUBLAS_WORKSPACE_CONFIG", "CUBLAS_WORKSPACE_CONFIG", 80),
    FieldSpec("software.environment.NVIDIA_TF32_OVERRIDE", "NVIDIA_TF32_OVERRIDE", 81),
    FieldSpec(
        "software.environment.TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", 82
    ),
    FieldSpec("software.environment.MKL_CBWR", "MKL_CBWR", 83),
    FieldSpec("software.environment.ATEN_CPU_CAPABILITY", "ATEN_CPU_CAPABILITY", 84),
    FieldSpec("software.environment.NCCL_ALGO", "NCCL_ALGO", 85),
    FieldSpec("software.environment.NCCL_PROTO", "NCCL_PROTO", 86),
    FieldSpec(
        "software.environment.NVTE_ALLOW_NONDETERMINISTIC_ALGO", "NVTE_ALLOW_NONDETERMINISTIC_ALGO", 87
    ),
    FieldSpec("software.environment.PYTHONHASHSEED", "PYTHONHASHSEED", 88),
    FieldSpec("software.distributed.world_size", "world size", 90),
    # The rest of the Python stack.
    FieldSpec("software.numpy", "numpy", 100),
    FieldSpec("software.numpy.version", "numpy version", 100),
    FieldSpec("software.numpy.simd", "numpy SIMD extensions", 101),
    FieldSpec("software.python.version", "Python version", 102),
    FieldSpec("software.python.implementation", "Python implementation", 103),
    FieldSpec("software.os.id", "OS", 104),
    FieldSpec("software.os.version_id", "OS release", 105),
    FieldSpec("software.distributions.sha256", "installed Python packages", 110),
    # Recorded for context; never a reason to expect different numbers.
    FieldSpec("hardware.gpus[].memory_total_bytes", "GPU memory", 200, affects_numerics=False),
    FieldSpec("hardware.gpus[].uuid_sha256", "GPU identity (UUID hash)", 201, affects_numerics=False),
    FieldSpec("hardware.gpus[].ecc_mode", "GPU ECC mode", 202, affects_numerics=False),
    FieldSpec("hardware.gpus[].persistence_mode", "GPU persistence mode", 203, affects_numerics=False),
    FieldSpec("hardware.gpus[].sm_count_source", "GPU SM count source", 204, affects_numerics=False),
    FieldSpec("software.image.id", "container image id", 210, affects_numerics=False),
    FieldSpec("software.image.digest", "container image digest", 211, affects_numerics=False),
    FieldSpec("software.libraries", "loaded library paths", 212, affects_numerics=False),
    FieldSpec("software.distributions.count", "installed Python package count", 213, affects_numerics=False),
    FieldSpec("software.distributed.rank", "rank", 214, affects_numerics=False),
    FieldSpec(
        "software.environment.CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", 215, affects_numerics=False
    ),
    FieldSpec("software.environment.CUDA_DEVICE_ORDER", "CUDA_DEVICE_ORDER", 216, affects_numerics=False),
    FieldSpec(
        "software.environment.CUDA_LAUNCH_BLOCKING", "CUDA_LAUNCH_BLOCKING", 217, affects_numerics=False
    ),
    FieldSpec("hardware.cpu.logical_cores", "logical CPU cores", 220, affects_numerics=False),
    FieldSpec("hardware.cpu.usable_cores", "usable CPU cores", 221, affects_numerics=False),
    FieldSpec("hardware.memory_total_bytes", "memory total", 222, affects_numerics=False),
    FieldSpec("hardware.hostname", "hostname", 223, affects_numerics=False),
    FieldSpec("software.kernel", "kernel", 224, affects_numerics=False),
    FieldSpec("software.os.pretty_name", "OS name", 225, affects_numerics=False),
    FieldSpec("software.python.executable", "Python executable", 226, affects_numerics=False),
)

# Environment variables recorded under software.environment: those FIELDS names there.
RECORDED_ENVIRONMENT: Final = tuple(
    spec.path.rpartition(".")[2] for spec in FIELDS if spec.path.startswith("software.environment.")
)
THREAD_ENVIRONMENT: Final = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")

# CPU features that select different floating-point kernels (x86 and Arm spellings).
NUMERICS_CPU_FLAGS: Final = frozenset(
    {"avx", "avx2", "fma", "f16c", "avx_vnni", "avx_vnni_int8", "avx_ne_convert", "avx_ifma"}
    | {"asimd", "asimdhp", "asimddp", "fphp", "sve", "sve2", "bf16", "i8mm", "sme"}
)
NUMERICS_CPU_FLAG_PREFIXES: Final = ("avx512", "amx")

# FP32 CUDA cores per SM by compute capability (the CUDA samples' table), used to turn NVML's core
# count into an SM count when NVML will not report SMs directly (it does so only for MIG handles).
CUDA_CORES_PER_SM: Final[Mapping[str, int]] = {
    "7.0": 64,
    "7.2": 64,
    "7.5": 64,
    "8.0": 64,
    "8.6": 128,
    "8.7": 128,
    "8.9": 128,
    "9.0": 128,
}

# Shared libraries whose loaded version is recorded; matched on the file name in /proc/self/maps.
TRACKED_LIBRARIES: Final = ("cudnn", "cublas", "cublasLt", "cudart")
_LIBRARY_FILE = re.compile(r"^lib(cudnn|cublas|cublasLt|cudart)\.so(?:\.(\d+(?:\.\d+)*))?$")
_INDEX = re.compile(r"\[\d+\]")


def absent(reason: str) -> dict[str, str]:
    """The marker a probe leaves in place of a value it could not get."""
    return {"absent": reason}


def is_absent(value: object) -> TypeGuard[Mapping[str, str]]:
    return isinstance(value, Mapping) and set(value) == {"absent"}


# ---------------------------------------------------------------------------------------------------
# The field table, as used by stack_digest and reprobox.explain


_BY_PATH: Final = {spec.path: spec for spec in FIELDS}


@functools.lru_cache(maxsize=4096)
def field_spec(path: str) -> FieldSpec | None:
    """The FIELDS entry for a dotted path such as ``hardware.gpus[0].name``, or None if unlisted.

    A listed numerics path is itself; an unlisted path above listed numerics fields (a probe absent
    as a whole) takes the most important of them; otherwise a path belongs to the nearest listed path
    at or above it (``software.blas.torch.mkl`` to ``software.blas.torch``). Unlisted fields below a
    numerics group count as numerics: claiming "same stack" wrongly costs more than the reverse.
    """
    pattern = _INDEX.sub("[]", path)
    exact = _BY_PATH.get(pattern)
    if exact is not None and exact.affects_numerics:
        return exact
    below = [spec for spec in FIELDS if spec.path.startswith((pattern + ".", pattern + "["))]
    numerics_below = [spec for spec in below if spec.affects_numerics]
    if numerics_below:
        return min(numerics_below, key=lambda spec: spec.rank)
    parent = pattern
    while True:
        if parent in _BY_PATH:
            return _BY_PATH[parent]
        cut = max(parent.rfind("."), parent.rfind("["))
        if cut <= 0:
            return min(below, key=lambda spec: spec.rank) if below else None
        parent = parent[:cut]


def iter_fields(value: object, prefix: str = "") -> Iterator[tuple[str, object]]:
    """Yield (dotted path, leaf value) pairs in recorded order; absent markers and lists of plain values
    are leaves."""
    if isinstance(value, Mapping) and value and not is_absent(value):
        for key in value:
            yield from iter_fields(value[key], f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and any(isinstance(item, Mapping) for item in value):
        for index, item in enumerate(value):
            yield from iter_fields(item, f"{prefix}[{index}]")
    else:
        yield prefix, value


def numerics_fields(fp: Mapping[str, Any]) -> dict[str, object]:
    """The fields of a fingerprint that change numerics, by dotted path, in canonical form."""
    selected: dict[str, object] = {}
    for path, value in iter_fields({"hardware": fp.get("hardware"), "software": fp.get("software")}):
        spec = field_spec(path)
        if spec is None or not spec.affects_numerics:
            continue
        if is_absent(value):
            selected[path] = {"absent": True}  # why a probe failed does not change the numbers
        elif isinstance(value, list):
            selected[path] = sorted(value, key=_canonical)
        else:
            selected[path] = value
    return selected


def stack_digest(fp: Mapping[str, Any]) -> str:
    """sha256 over only the fields in FIELDS that change numerics (see the module docstring)."""
    return hashlib.sha256(_canonical(numerics_fields(fp)).encode()).hexdigest()


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


# ---------------------------------------------------------------------------------------------------
# Collection


def collect(
    *, nvml: ModuleType | Any | None = None, image: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Fingerprint this process's machine and stack; never raises and never imports torch or numpy.

    ``nvml`` is a pynvml-compatible module (None: import pynvml if possible); ``image`` holds the
    container image's ``id`` and ``digest`` (None: from REPROBOX_IMAGE_ID / REPROBOX_IMAGE_DIGEST).
    """
    return _collect(nvml=nvml, image=image, torch_reason=TORCH_NOT_IMPORTED)


def _collect(*, nvml: Any, image: Mapping[str, str] | None, torch_reason: str) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation notices from probed APIs must not reach the job
        torch = sys.modules.get("torch")
        nvidia, gpus = _probe_nvidia(nvml, torch)
        hardware = {
            "cpu": _probe_cpu(),
            "memory_total_bytes": _attempt(_memory_total_bytes),
            "hostname": _attempt(lambda: os.uname().nodename),
            "nvidia": nvidia,
            "gpus": gpus,
        }
        distributions = _attempt(_installed_distributions)
        versions: Mapping[str, str] = {} if is_absent(distributions) else distributions
        torch_facts = _probe_torch(torch, torch_reason)
        numpy_version, numpy_blas = _probe_numpy(sys.modules.get("numpy"))
        software = {
            "os": _attempt(_os_release),
            "kernel": _attempt(lambda: os.uname().release),
            "image": _image(image),
            "python": {
                "implementation": sys.implementation.name,
                "version": sys.version.split()[0],
                "executable": sys.executable,
            },
            "torch": torch_facts["torch"],
            "nccl": torch_facts["nccl"],
            "libraries": _attempt(lambda: loaded_libraries(_read_text("/proc/self/maps"), versions)),
            "blas": {
                "torch": _attempt(lambda: _torch_blas(torch)) if torch else absent(torch_reason),
                "numpy": numpy_blas,
            },
            "numpy": numpy_version,
            "threads": {**torch_facts["threads"], **_environment(THREAD_ENVIRONMENT)},
            "determinism": torch_facts["determinism"],
            "precision": torch_facts["precision"],
            "environment": _environment(RECORDED_ENVIRONMENT),
            "distributions": distributions if is_absent(distributions) else _distribution_digest(versions),
            "distributed": {
                "world_size": _int_or_text(os.environ.get("WORLD_SIZE", "1")),
                "rank": _int_or_text(os.environ.get("RANK", "0")),
            },
        }
    fp: dict[str, Any] = {"schema": SCHEMA, "hardware": hardware, "software": software}
    fp["stack_digest"] = stack_digest(fp)
    return fp


def _attempt(probe: Callable[[], object]) -> Any:
    try:
        return probe()
    except Exception as exc:
        return absent(_reason(exc))


def _reason(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "NVMLError_NotSupported":
        return "not supported"
    try:
        text = str(exc)
    except Exception:
        text = ""
    return f"{name}: {text}" if text else name


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _int_or_text(value: str) -> int | str:
    try:
        return int(value)
    except ValueError:
        return value


def _environment(names: Sequence[str]) -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in names}


@functools.lru_cache(maxsize=8)
def _cached_text(path: str) -> str:
    """Files that do not change while a process runs (/proc/cpuinfo, /etc/os-release) are read once."""
    return Path(path).read_text(encoding="utf-8", errors="replace")


def _read_text(path: str) -> str:
    return Path(path).read_text(encoding="utf-8", errors="replace")


# --- CPU and memory ---------------------------------------------------------------------------------


def cpu_from_cpuinfo(text: str) -> dict[str, Any]:
    """Model and numerics-relevant ISA flags from the first processor in /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    model: object = fields.get("model name") or fields.get("Hardware")
    if not model and "CPU implementer" in fields:
        model = f"implementer {fields['CPU implementer']} part {fields.get('CPU part', '?')}"
    flags = (fields.get("flags") or fields.get("Features") or "").split()
    return {
        "model": model or absent("no model name in /proc/cpuinfo"),
        "flags": sorted(
            {f for f in flags if f in NUMERICS_CPU_FLAGS or f.startswith(NUMERICS_CPU_FLAG_PREFIXES)}
        ),
    }


def _probe_cpu() -> dict[str, Any]:
    parsed = _attempt(lambda: cpu_from_cpuinfo(_cached_text("/proc/cpuinfo")))
    cpu = parsed if not is_absent(parsed) else {"model": parsed, "flags": parsed}
    cpu["architecture"] = _attempt(lambda: os.uname().machine)
    cpu["logical_cores"] = os.cpu_count() or absent("os.cpu_count() is unknown")
    cpu["usable_cores"] = _attempt(lambda: len(os.sched_getaffinity(0)))
    return cpu


def _memory_total_bytes() -> int:
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", _cached_text("/proc/meminfo"), re.MULTILINE)
    if match is None:
        raise ValueError("no MemTotal line in /proc/meminfo")
    return int(match.group(1)) * 1024


def _os_release() -> dict[str, str | None]:
    values: dict[str, str] = {}
    for line in _cached_text("/etc/os-release").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip("\"'")
    return {
        "id": values.get("ID"),
        "version_id": values.get("VERSION_ID"),
        "pretty_name": values.get("PRETTY_NAME"),
    }


# --- NVIDIA GPUs through NVML -----------------------------------------------------------------------


def _probe_nvidia(nvml: Any, torch: ModuleType | None) -> tuple[Any, Any]:
    """(driver facts, per-GPU list); both absent with the same reason when NVML cannot start."""
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except Exception as exc:
            missing = absent(f"nvidia-ml-py is not importable ({_reason(exc)})")
            return missing, missing
    try:
        nvml.nvmlInit()
    except Exception as exc:
        missing = absent(f"NVML did not start ({_reason(exc)})")
        return missing, missing
    try:
        count = _attempt(lambda: int(nvml.nvmlDeviceGetCount()))
        nvidia = {
            "driver_version": _attempt(lambda: _text(nvml.nvmlSystemGetDriverVersion())),
            "cuda_driver_version": _attempt(lambda: _cuda_version(nvml.nvmlSystemGetCudaDriverVersion())),
            "gpu_count": count,
        }
        if is_absent(count):
            return nvidia, count
        torch_sms = _attempt(lambda: _torch_sm_counts(torch))
        sms_by_uuid = torch_sms if isinstance(torch_sms, dict) and not is_absent(torch_sms) else {}
        gpus = [_attempt(functools.partial(_probe_gpu, nvml, index, sms_by_uuid)) for index in range(count)]
        return nvidia, gpus
    finally:
        with contextlib.suppress(Exception):  # a failed shutdown cannot change what was recorded
            nvml.nvmlShutdown()


def _cuda_version(encoded: int) -> str:
    """NVML's 12040 → "12.4"."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def _capability(major_minor: Sequence[int]) -> str:
    major, minor = major_minor[0], major_minor[1]
    return f"{major}.{minor}"


def _enabled(state: object) -> str:
    return "enabled" if state else "disabled"


def _mode(current_and_pending: Sequence[int]) -> str:
    current, pending = current_and_pending[0], current_and_pending[1]
    text = _enabled(current)
    return text if bool(current) == bool(pending) else f"{text} (pending {_enabled(pending)})"


def _probe_gpu(nvml: Any, index: int, torch_sms: Mapping[str, int]) -> dict[str, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    uuid = _attempt(lambda: _text(nvml.nvmlDeviceGetUUID(handle)))
    capability = _attempt(lambda: _capability(nvml.nvmlDeviceGetCudaComputeCapability(handle)))
    mig_mode = _attempt(lambda: nvml.nvmlDeviceGetMigMode(handle))
    gpu: dict[str, Any] = {
        "name": _attempt(lambda: _text(nvml.nvmlDeviceGetName(handle))),
        "uuid_sha256": uuid if is_absent(uuid) else hashlib.sha256(uuid.encode()).hexdigest()[:16],
        "compute_capability": capability,
        **_sm_count(nvml, handle, capability, uuid, torch_sms),
        "memory_total_bytes": _attempt(lambda: int(nvml.nvmlDeviceGetMemoryInfo(handle).total)),
        "mig_mode": mig_mode if is_absent(mig_mode) else _enabled(mig_mode[0]),  # pending changes nothing yet
        "ecc_mode": _attempt(lambda: _mode(nvml.nvmlDeviceGetEccMode(handle))),
        "persistence_mode": _attempt(lambda: _enabled(nvml.nvmlDeviceGetPersistenceMode(handle))),
    }
    if not is_absent(mig_mode) and mig_mode[0]:
        gpu["mig_devices"] = _attempt(lambda: _mig_devices(nvml, handle))
    return gpu


def _sm_count(
    nvml: Any, handle: object, capability: object, uuid: object, torch_sms: Mapping[str, int]
) -> dict[str, Any]:
    """SM count from NVML attributes, else torch's device properties, else NVML cores / cores per SM."""
    try:
        count = int(nvml.nvmlDeviceGetAttributes(handle).multiprocessorCount)
        return {"sm_count": count, "sm_count_source": "nvmlDeviceGetAttributes"}
    except Exception as exc:
        attributes_reason = _reason(exc)
    if isinstance(uuid, str) and _uuid_key(uuid) in torch_sms:
        return {"sm_count": torch_sms[_uuid_key(uuid)], "sm_count_source": "torch.cuda.get_device_properties"}
    per_sm = CUDA_CORES_PER_SM.get(capability) if isinstance(capability, str) else None
    cores = _attempt(lambda: int(nvml.nvmlDeviceGetNumGpuCores(handle)))
    if per_sm and isinstance(cores, int) and cores % per_sm == 0:
        return {
            "sm_count": cores // per_sm,
            "sm_count_source": f"nvmlDeviceGetNumGpuCores / {per_sm} cores per SM",
        }
    cores_reason = cores["absent"] if is_absent(cores) else f"cores per SM unknown for {capability}"
    missing = absent(
        f"NVML gives SMs only for MIG devices ({attributes_reason}) and none could be derived from the"
        f" core count ({cores_reason})"
    )
    return {"sm_count": missing, "sm_count_source": missing}


def _uuid_key(uuid: str) -> str:
    return uuid.lower().removeprefix("gpu-")


def _torch_sm_counts(torch: ModuleType | None) -> dict[str, int]:
    """SM counts torch already knows, by UUID; only when CUDA is initialized, never initializing it."""
    if torch is None or not torch.cuda.is_initialized():
        return {}
    counts: dict[str, int] = {}
    for index in range(torch.cuda.device_count()):
        properties = torch.cuda.get_device_properties(index)
        counts[_uuid_key(str(properties.uuid))] = int(properties.multi_processor_count)
    return counts


def _mig_devices(nvml: Any, handle: object) -> list[dict[str, int]]:
    devices = []
    for index in range(int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
        try:
            mig_handle = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
        except Exception as exc:
            if type(exc).__name__ == "NVMLError_NotFound":
                continue  # a slot with no MIG device in it
            raise
        attributes = nvml.nvmlDeviceGetAttributes(mig_handle)
        devices.append(
            {"sm_count": int(attributes.multiprocessorCount), "memory_mib": int(attributes.memorySizeMB)}
        )
    return devices


# --- torch, numpy, BLAS -----------------------------------------------------------------------------


def _probe_torch(torch: ModuleType | None, reason: str) -> dict[str, Any]:
    """torch's versions, NCCL, determinism and precision switches, and thread counts."""
    if torch is None:
        return _torch_absent(reason)
    try:
        return _torch_facts(torch)
    except Exception as exc:  # e.g. torch half-imported; each probe below guards only itself
        return _torch_absent(f"torch could not be probed ({_reason(exc)})")


def _torch_absent(reason: str) -> dict[str, Any]:
    missing = absent(reason)
    threads = {"torch_intra_op": missing, "torch_inter_op": missing}
    return {
        "torch": missing,
        "nccl": missing,
        "determinism": missing,
        "precision": missing,
        "threads": threads,
    }


def _torch_facts(torch: ModuleType) -> dict[str, Any]:
    backends = torch.backends
    return {
        "torch": {
            "version": _attempt(lambda: str(torch.__version__)),
            "git_version": _attempt(lambda: torch.version.git_version),
            "cuda": _attempt(lambda: torch.version.cuda),
            "cudnn": _attempt(lambda: _cudnn_version(backends.cudnn.version())),
            "cpu_capability": _attempt(backends.cpu.get_cpu_capability),
        },
        "nccl": _attempt(lambda: _nccl_version(torch)),
        "determinism": {
            "deterministic_algorithms": _attempt(torch.are_deterministic_algorithms_enabled),
            "deterministic_warn_only": _attempt(torch.is_deterministic_algorithms_warn_only_enabled),
            "cudnn_deterministic": _attempt(lambda: bool(backends.cudnn.deterministic)),
            "cudnn_benchmark": _attempt(lambda: bool(backends.cudnn.benchmark)),
            "cudnn_enabled": _attempt(lambda: bool(backends.cudnn.enabled)),
            "mkldnn_enabled": _attempt(lambda: bool(backends.mkldnn.enabled)),
            "fill_uninitialized_memory": _attempt(
                lambda: bool(torch.utils.deterministic.fill_uninitialized_memory)
            ),
        },
        "precision": {
            "matmul_allow_tf32": _attempt(lambda: bool(backends.cuda.matmul.allow_tf32)),
            "cudnn_allow_tf32": _attempt(lambda: bool(backends.cudnn.allow_tf32)),
            "float32_matmul_precision": _attempt(torch.get_float32_matmul_precision),
            "fp32_precision": _attempt(lambda: str(backends.fp32_precision)),
            "matmul_allow_fp16_reduced_precision": _attempt(
                lambda: bool(backends.cuda.matmul.allow_fp16_reduced_precision_reduction)
            ),
            "matmul_allow_bf16_reduced_precision": _attempt(
                lambda: bool(backends.cuda.matmul.allow_bf16_reduced_precision_reduction)
            ),
        },
        "threads": {
            "torch_intra_op": _attempt(torch.get_num_threads),
            "torch_inter_op": _attempt(torch.get_num_interop_threads),
        },
    }


def _cudnn_version(encoded: int | None) -> str | dict[str, str]:
    """torch's cuDNN integer → "9.1.0" (cuDNN 9 packs major*10000, cuDNN 8 and older major*1000)."""
    if encoded is None:
        return absent("torch has no cuDNN")
    if encoded >= 90000:
        return f"{encoded // 10000}.{encoded % 10000 // 100}.{encoded % 100}"
    return f"{encoded // 1000}.{encoded % 1000 // 100}.{encoded % 100}"


def _nccl_version(torch: ModuleType) -> str | dict[str, str]:
    if torch.version.cuda is None:
        return absent("torch is built without CUDA")
    if not torch.cuda.is_available():
        return absent("CUDA is not available")
    version = torch.cuda.nccl.version()
    if isinstance(version, int):  # torch < 2.1: one integer
        return str(version)
    numbers = ".".join(str(part) for part in version[:3])
    return numbers + (f"+{version[3]}" if len(version) > 3 else "")


def _torch_blas(torch: ModuleType) -> dict[str, str | None]:
    """BLAS, LAPACK, MKL and oneDNN as torch was built with them (torch.__config__.show())."""
    config = str(torch.__config__.show())
    settings = dict(re.findall(r"\b([A-Z_]+_INFO)=([^,\s]*)", config))
    mkl = re.search(r"Math Kernel Library Version ([^\n]+?) for ", config)
    onednn = re.search(r"MKL-DNN (v[\d.]+)", config)
    return {
        "blas": settings.get("BLAS_INFO"),
        "lapack": settings.get("LAPACK_INFO"),
        "mkl": mkl.group(1) if mkl else None,
        "onednn": onednn.group(1) if onednn else None,
    }


def _probe_numpy(numpy: ModuleType | None) -> tuple[Any, Any]:
    """(numpy's version and SIMD dispatch, numpy's BLAS and LAPACK)."""
    if numpy is None:
        return absent(NUMPY_NOT_IMPORTED), absent(NUMPY_NOT_IMPORTED)
    try:
        return _numpy_facts(numpy)
    except Exception as exc:
        missing = absent(f"numpy could not be probed ({_reason(exc)})")
        return missing, missing


def _numpy_facts(numpy: ModuleType) -> tuple[Any, Any]:
    config = _attempt(lambda: numpy.show_config(mode="dicts"))  # numpy >= 1.25; older ones lack mode=
    if not isinstance(config, dict) or is_absent(config):
        missing = config if is_absent(config) else absent("numpy.show_config(mode='dicts') returned no dict")
        return {"version": str(numpy.__version__), "simd": missing}, missing
    simd = config.get("SIMD Extensions") or {}
    dependencies = config.get("Build Dependencies") or {}

    def library(role: str) -> str | None:
        entry = dependencies.get(role) or {}
        return " ".join(str(entry[key]) for key in ("name", "version") if entry.get(key)) or None

    version = {
        "version": str(numpy.__version__),
        "simd": {"baseline": list(simd.get("baseline", [])), "found": list(simd.get("found", []))},
    }
    return version, {"blas": library("blas"), "lapack": library("lapack")}


# --- libraries actually loaded, and installed distributions -----------------------------------------


def loaded_libraries(maps: str, distributions: Mapping[str, str]) -> dict[str, Any]:
    """Version of each TRACKED_LIBRARIES entry mapped into this process, from /proc/self/maps text.

    The version comes from the file name (``libcudnn.so.9.1.0``); when the file name carries only a
    major version (pip wheels ship ``nvidia/cudnn/lib/libcudnn.so.9``) from the owning distribution.
    """
    found: dict[str, dict[str, str]] = {}
    for line in maps.splitlines():
        if ".so" not in line:
            continue
        parts = line.split(maxsplit=5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        mapped = parts[5]
        if _LIBRARY_FILE.match(Path(mapped).name) is None:
            continue
        real = os.path.realpath(mapped)  # the kernel shows the resolved file; this also covers links
        match = _LIBRARY_FILE.match(Path(real).name) or _LIBRARY_FILE.match(Path(mapped).name)
        if match is not None and match.group(1) not in found:
            found[match.group(1)] = _library_version(match.group(1), real, match.group(2), distributions)
    return {name: found.get(name, absent("not loaded in this process")) for name in TRACKED_LIBRARIES}


def _library_version(
    name: str, path: str, from_file: str | None, distributions: Mapping[str, str]
) -> dict[str, str]:
    if from_file and from_file.count(".") >= 1:
        return {"version": from_file, "version_source": "file name", "path": path}
    wheel = re.search(r"/site-packages/nvidia/([^/]+)/", path)
    if wheel:
        stem = "nvidia-" + wheel.group(1).replace("_", "-").lower()
        owners = sorted(d for d in distributions if re.fullmatch(re.escape(stem) + r"(-cu\d+)?", d))
        if owners:
            return {
                "version": distributions[owners[0]],
                "version_source": f"distribution {owners[0]}",
                "path": path,
            }
    return {"version": from_file or "unknown", "version_source": "file name (major only)", "path": path}


def _normalize_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed_distributions() -> dict[str, str]:
    """Installed distributions, normalized name → version; the first on sys.path wins, as for import.

    A ``name-version.dist-info`` directory name is read instead of its METADATA: parsing every METADATA
    file costs tens of milliseconds and the name and version are already in the directory name.
    """
    versions: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        path = getattr(dist, "_path", None)
        stem = path.name if isinstance(path, Path) else ""
        name, _, version = stem.removesuffix(".dist-info").partition("-")
        if not stem.endswith(".dist-info") or not version or "-" in version:
            name, version = dist.metadata["Name"] or "", dist.version or ""
        if name:
            versions.setdefault(_normalize_name(name), version)
    return versions


def _distribution_digest(versions: Mapping[str, str]) -> dict[str, Any]:
    """A digest of the sorted ``name==version`` list: a pip freeze without running pip."""
    if not versions:
        return absent("no installed distributions found")
    listing = "\n".join(sorted(f"{name}=={version}" for name, version in versions.items()))
    return {"count": len(versions), "sha256": hashlib.sha256(listing.encode()).hexdigest()}


def _image(image: Mapping[str, str] | None) -> dict[str, Any]:
    source = (
        image
        if image is not None
        else {
            "id": os.environ.get("REPROBOX_IMAGE_ID", ""),
            "digest": os.environ.get("REPROBOX_IMAGE_DIGEST", ""),
        }
    )
    recorded = {key: source.get(key) or None for key in ("id", "digest")}
    if not any(recorded.values()):
        return absent("no container image recorded (REPROBOX_IMAGE_ID and REPROBOX_IMAGE_DIGEST are unset)")
    return recorded


# ---------------------------------------------------------------------------------------------------
# Presentation


def format_table(fp: Mapping[str, Any]) -> str:
    """The fingerprint as an aligned two-column table under Hardware and Software headers."""
    sections = [("Hardware", fp.get("hardware", {})), ("Software", fp.get("software", {}))]
    rows: list[tuple[str, str] | str] = []
    for title, section in sections:
        rows.append(title)
        rows.extend((_row_name(path), _show(path, value)) for path, value in iter_fields(section))
    rows.append(("stack digest", str(fp.get("stack_digest", ""))))
    width = max(len(row[0]) for row in rows if isinstance(row, tuple))
    lines = [row if isinstance(row, str) else f"  {row[0]:<{width}}  {row[1]}" for row in rows]
    return "\n".join(lines)


def _row_name(path: str) -> str:
    return re.sub(r"^gpus\[(\d+)\]\.", r"gpu \1 ", path)


def _show(path: str, value: object) -> str:
    if is_absent(value):
        return f"absent ({value['absent']})"
    if value is None:
        return "unset" if path.rpartition(".")[2].isupper() else "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return " ".join(str(item) for item in value) if value else "(none)"
    if path.endswith("_bytes") and isinstance(value, int):
        return f"{value} ({value / 2**30:.1f} GiB)"
    return str(value)


# ---------------------------------------------------------------------------------------------------
# A probe in a process of its own


def collect_in_new_process(
    *, python: str = sys.executable, import_torch: bool = True, timeout: float = 120
) -> dict[str, Any]:
    """Run this module in a fresh interpreter (importing torch first if asked) and return its fingerprint."""
    command = [python, "-m", "reprobox.guest.fingerprint", *(["--import-torch"] if import_torch else [])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(
            f"the fingerprint probe `{' '.join(command)}` did not finish ({exc}); check that {python} runs"
        ) from exc
    if done.returncode != 0:
        raise EnvironmentProblem(
            f"the fingerprint probe `{' '.join(command)}` exited with status {done.returncode};"
            f" check that reprobox is installed for {python}",
            log_tail=done.stderr[-4000:],
        )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reprobox.guest.fingerprint",
        description="Print this machine's reprobox fingerprint as JSON.",
    )
    parser.add_argument(
        "--import-torch", action="store_true", help="import torch (and numpy) first, as a job would"
    )
    parser.add_argument("--output", type=Path, help="write the JSON here (atomically) instead of printing it")
    parser.add_argument("--table", action="store_true", help="print a readable table instead of JSON")
    args = parser.parse_args(argv)
    torch_reason = TORCH_NOT_IMPORTED
    if args.import_torch:
        try:
            importlib.import_module("torch")
        except Exception as exc:
            torch_reason = f"import torch failed ({_reason(exc)})"
        with contextlib.suppress(Exception):  # recorded as not imported
            importlib.import_module("numpy")
    fp = _collect(nvml=None, image=None, torch_reason=torch_reason)
    text = json.dumps(fp, indent=2) + "\n"
    if args.output is not None:
        _write_atomically(args.output, text)
    if args.table:
        sys.stdout.write(format_table(fp) + "\n")
    elif args.output is None:
        sys.stdout.write(text)
    return 0


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


if __name__ == "__main__":
    raise SystemExit(main())
