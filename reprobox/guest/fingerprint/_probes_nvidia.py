"""Probes of NVIDIA GPUs through NVML: the driver, and each GPU's numerics facts and MIG slices."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Final

from reprobox.guest.fingerprint._absent import _attempt, _reason, absent, is_absent

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


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


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
