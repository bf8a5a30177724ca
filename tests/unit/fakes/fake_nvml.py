"""A stand-in for the pynvml module with the values real NVIDIA GPUs report, for machines without one.

It follows nvidia-ml-py's calling conventions: functions raise NVMLError subclasses named after the
NVML return code (NVMLError_NotSupported, NVMLError_LibraryNotFound, ...), every call but nvmlInit
fails with NVMLError_Uninitialized until nvmlInit succeeds, nvmlDeviceGetUUID returns bytes, and
nvmlDeviceGetAttributes works only on MIG device handles, as NVML documents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1


class NVMLError(Exception):
    """Base of the fake errors; ``value`` is NVML's return code, as in pynvml."""

    value = 999
    text = "Unknown Error"

    def __str__(self) -> str:
        return self.text


class NVMLError_Uninitialized(NVMLError):
    value = 1
    text = "Uninitialized"


class NVMLError_NotSupported(NVMLError):
    value = 3
    text = "Not Supported"


class NVMLError_NotFound(NVMLError):
    value = 6
    text = "Not Found"


class NVMLError_DriverNotLoaded(NVMLError):
    value = 9
    text = "Driver Not Loaded"


class NVMLError_LibraryNotFound(NVMLError):
    value = 12
    text = "NVML Shared Library Not Found"


@dataclass(frozen=True)
class FakeGPU:
    """What one physical GPU answers. ``None`` for a mode means the query is not supported."""

    name: str
    uuid: str
    compute_capability: tuple[int, int]
    cuda_cores: int
    memory_total: int
    ecc: tuple[int, int] | None = (1, 1)
    mig: tuple[int, int] | None = (0, 0)
    persistence: int | None = 1
    mig_slices: tuple[tuple[int, int], ...] = ()  # (SM count, memory MiB) of each MIG device


H100_SXM5_80GB = FakeGPU(
    name="NVIDIA H100 80GB HBM3",
    uuid="GPU-8f6f1b2c-5a3e-4c9d-9e21-7d0c4b6a1f53",
    compute_capability=(9, 0),
    cuda_cores=132 * 128,
    memory_total=81559 * 2**20,
)
A100_SXM4_80GB = FakeGPU(
    name="NVIDIA A100-SXM4-80GB",
    uuid="GPU-2b7d4e90-13c5-8a6f-0b44-c1e9f2a35d78",
    compute_capability=(8, 0),
    cuda_cores=108 * 64,
    memory_total=81920 * 2**20,
)
A100_SXM4_80GB_MIG = FakeGPU(
    name="NVIDIA A100-SXM4-80GB",
    uuid="GPU-6c0a9d13-7e42-b5f8-21d6-93ab4e07c2f1",
    compute_capability=(8, 0),
    cuda_cores=108 * 64,
    memory_total=81920 * 2**20,
    mig=(1, 1),
    mig_slices=((42, 40192), (14, 9856)),  # a 3g.40gb and a 1g.10gb instance
)
RTX_4090 = FakeGPU(
    name="NVIDIA GeForce RTX 4090",
    uuid="GPU-d41e5b77-02c8-6f93-a1b0-5e8c7d2f4a69",
    compute_capability=(8, 9),
    cuda_cores=128 * 128,
    memory_total=24564 * 2**20,
    ecc=None,
    mig=None,
    persistence=0,
)


@dataclass(frozen=True)
class _Handle:
    index: int


@dataclass(frozen=True)
class _MigHandle:
    parent: int
    index: int


@dataclass
class FakeNVML:
    """An object standing in for the pynvml module; counts nvmlInit and nvmlShutdown calls."""

    gpus: tuple[FakeGPU, ...] = ()
    driver_version: str = "550.54.15"
    cuda_driver_version: int = 12040
    init_error: type[NVMLError] | None = None
    calls: list[str] = field(default_factory=list)
    initialized: int = 0

    NVMLError = NVMLError
    NVMLError_Uninitialized = NVMLError_Uninitialized
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NotFound = NVMLError_NotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound

    def _ready(self, name: str) -> None:
        self.calls.append(name)
        if self.initialized <= 0:
            raise NVMLError_Uninitialized()

    def _gpu(self, handle: _Handle) -> FakeGPU:
        return self.gpus[handle.index]

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.init_error is not None:
            raise self.init_error()
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        self._ready("nvmlShutdown")
        self.initialized -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._ready("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._ready("nvmlSystemGetCudaDriverVersion")
        return self.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._ready("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._ready("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise NVMLError_NotFound()
        return _Handle(index)

    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        self._ready("nvmlDeviceGetName")
        return self._gpu(handle).name

    def nvmlDeviceGetUUID(self, handle: _Handle) -> bytes:
        self._ready("nvmlDeviceGetUUID")
        return self._gpu(handle).uuid.encode()

    def nvmlDeviceGetCudaComputeCapability(self, handle: _Handle) -> tuple[int, int]:
        self._ready("nvmlDeviceGetCudaComputeCapability")
        return self._gpu(handle).compute_capability

    def nvmlDeviceGetNumGpuCores(self, handle: _Handle) -> int:
        self._ready("nvmlDeviceGetNumGpuCores")
        return self._gpu(handle).cuda_cores

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle) -> SimpleNamespace:
        self._ready("nvmlDeviceGetMemoryInfo")
        total = self._gpu(handle).memory_total
        return SimpleNamespace(total=total, free=total - 2**29, used=2**29)

    def nvmlDeviceGetEccMode(self, handle: _Handle) -> list[int]:
        self._ready("nvmlDeviceGetEccMode")
        ecc = self._gpu(handle).ecc
        if ecc is None:
            raise NVMLError_NotSupported()
        return list(ecc)

    def nvmlDeviceGetMigMode(self, handle: _Handle) -> list[int]:
        self._ready("nvmlDeviceGetMigMode")
        mig = self._gpu(handle).mig
        if mig is None:
            raise NVMLError_NotSupported()
        return list(mig)

    def nvmlDeviceGetPersistenceMode(self, handle: _Handle) -> int:
        self._ready("nvmlDeviceGetPersistenceMode")
        persistence = self._gpu(handle).persistence
        if persistence is None:
            raise NVMLError_NotSupported()
        return persistence

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: _Handle) -> int:
        self._ready("nvmlDeviceGetMaxMigDeviceCount")
        gpu = self._gpu(handle)
        return 7 if gpu.mig is not None and gpu.mig[0] == NVML_DEVICE_MIG_ENABLE else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: _Handle, index: int) -> _MigHandle:
        self._ready("nvmlDeviceGetMigDeviceHandleByIndex")
        if index >= len(self._gpu(handle).mig_slices):
            raise NVMLError_NotFound()
        return _MigHandle(handle.index, index)

    def nvmlDeviceGetAttributes(self, handle: _Handle | _MigHandle) -> SimpleNamespace:
        self._ready("nvmlDeviceGetAttributes")
        if not isinstance(handle, _MigHandle):
            raise NVMLError_NotSupported()  # "This API currently only supports MIG device handles."
        sm_count, memory_mib = self.gpus[handle.parent].mig_slices[handle.index]
        return SimpleNamespace(multiprocessorCount=sm_count, memorySizeMB=memory_mib)
