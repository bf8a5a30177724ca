"""The field table: which fingerprint fields change numerics, their names, and the digest over them."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from reprobox.guest.fingerprint._absent import is_absent


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
    # Where the job computed: CPU kernels and CUDA kernels give different numbers.
    FieldSpec("software.torch.compute_device", "compute device (CPU or CUDA)", 5),
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
    FieldSpec("software.determinism.sdpa_backends", "attention (SDPA) kernels allowed", 67),
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

_INDEX = re.compile(r"\[\d+\]")

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
