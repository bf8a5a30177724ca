"""Probes of the numerical stack: torch and its switches, numpy, BLAS, loaded CUDA libraries, packages.

torch and numpy are probed only when the process has already imported them; nothing here imports them.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from reprobox.guest.fingerprint._absent import _attempt, _reason, absent, is_absent

TORCH_NOT_IMPORTED: Final = "torch not imported by this process"
NUMPY_NOT_IMPORTED: Final = "numpy not imported by this process"

# Shared libraries whose loaded version is recorded; matched on the file name in /proc/self/maps.
TRACKED_LIBRARIES: Final = ("cudnn", "cublas", "cublasLt", "cudart")
_LIBRARY_FILE = re.compile(r"^lib(cudnn|cublas|cublasLt|cudart)\.so(?:\.(\d+(?:\.\d+)*))?$")
# The wheel that ships each one, by its name without the -cuXX suffix CUDA 12's wheels carry: the
# folder does not tell, since CUDA 13's wheels share one (nvidia/cu13/lib/libcudart.so.13).
_LIBRARY_WHEELS: Final = {
    "cudnn": "nvidia-cudnn",
    "cublas": "nvidia-cublas",
    "cublasLt": "nvidia-cublas",
    "cudart": "nvidia-cuda-runtime",
}


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
            # Probed as the job's process ends: whether it computed on a GPU at all (a GPU machine's
            # CPU run and GPU run share every other fact).
            "compute_device": _attempt(lambda: "cuda" if torch.cuda.is_initialized() else "cpu"),
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
            "sdpa_backends": _attempt(lambda: _sdpa_backends(backends.cuda)),
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


def _sdpa_backends(cuda: Any) -> list[str]:
    """The scaled_dot_product_attention kernels PyTorch may pick, as the job left its switches."""
    checks = {
        "flash": "flash_sdp_enabled",
        "efficient": "mem_efficient_sdp_enabled",
        "cudnn": "cudnn_sdp_enabled",
        "math": "math_sdp_enabled",
    }
    return [name for name, check in checks.items() if hasattr(cuda, check) and getattr(cuda, check)()]


def _cudnn_version(encoded: int | None) -> str | dict[str, str]:
    """torch's cuDNN integer → "9.1.0" (cuDNN 9 packs major*10000, cuDNN 8 and older major*1000)."""
    if encoded is None:
        return absent("torch has no cuDNN")
    if encoded >= 90000:
        return f"{encoded // 10000}.{encoded % 10000 // 100}.{encoded % 100}"
    return f"{encoded // 1000}.{encoded % 1000 // 100}.{encoded % 100}"


def _nccl_version(torch: ModuleType) -> str | dict[str, str]:
    """The NCCL torch loaded (ncclGetVersion: the library's own answer, no GPU or driver needed), so a
    CUDA image names the NCCL it carries on a machine without GPUs too."""
    if torch.version.cuda is None:
        return absent("torch is built without CUDA")
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
        name = mapped.rpartition("/")[2]  # a few hundred lines in a torch process: no Path for each
        if _LIBRARY_FILE.match(name) is None:
            continue
        real = os.path.realpath(mapped)  # the kernel shows the resolved file; this also covers links
        match = _LIBRARY_FILE.match(real.rpartition("/")[2]) or _LIBRARY_FILE.match(name)
        if match is not None and match.group(1) not in found:
            found[match.group(1)] = _library_version(match.group(1), real, match.group(2), distributions)
    return {name: found.get(name, absent("not loaded in this process")) for name in TRACKED_LIBRARIES}


def _library_version(
    name: str, path: str, from_file: str | None, distributions: Mapping[str, str]
) -> dict[str, str]:
    if from_file and from_file.count(".") >= 1:
        return {"version": from_file, "version_source": "file name", "path": path}
    if "/site-packages/nvidia/" in path:
        stem = _LIBRARY_WHEELS[name]
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
    import importlib.metadata  # 20+ ms to import: only when the fingerprint is taken

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
