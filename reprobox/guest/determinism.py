"""What "deterministic" means for torch and for the process environment, in one place.

`process_environment` is applied by the entrypoint before the user's interpreter starts (variables
read by CUDA, cuBLAS, OpenMP and Python itself at start-up); `apply_torch` runs inside every Python
process of the job right after it imports torch.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import ModuleType
from typing import Any

from reprobox.fileio import write_json_atomic
from reprobox.guest import settings
from reprobox.guest.post_import import when_imported


@dataclass(frozen=True)
class Determinism:
    """The `determinism:` section of job.yaml; rebuilt from the environment inside the job's processes."""

    algorithms: bool = True
    warn_only: bool = False
    cudnn_benchmark: bool = False
    cublas_workspace_config: str = ":4096:8"
    threads: int | None = None
    fill_uninitialized_memory: bool = True
    cuda_launch_blocking: bool = False
    nccl_algo: str = "Ring"  # NCCL's reduction algorithm, pinned so collectives sum in a fixed order
    # Generators created without a seed (np.random.default_rng(), random.Random(), Generator.seed())
    # take one derived from the job seed instead of the OS's entropy (see guest/entropy.py).
    seed_unseeded_generators: bool = True
    # TF32 for float32 matmuls and cuDNN convolutions (Ampere and later): faster, and bit-exact run to
    # run, but with other numbers than full float32. Off, as PyTorch's reproducibility notes advise.
    tf32: bool = False
    onednn: bool = True  # torch.backends.mkldnn.enabled: oneDNN's CPU kernels (convolutions, matmuls)
    # Which scaled_dot_product_attention kernels PyTorch may pick (flash, efficient, cudnn, math);
    # None leaves its choice alone. Fused kernels differ in speed and in their backward's summation order.
    sdpa_backends: tuple[str, ...] | None = None


SDPA_BACKENDS = ("flash", "efficient", "cudnn", "math")


def settings_from_env(env: Mapping[str, str] | None = None) -> Determinism:
    env = os.environ if env is None else env
    raw = env.get(settings.DETERMINISM)
    if not raw:
        return Determinism()
    return determinism_from_json(json.loads(raw))


def determinism_from_json(data: Mapping[str, Any]) -> Determinism:
    """The settings from their JSON form (the guest's variable, an attestation); unknown keys left out."""
    known = {f.name for f in fields(Determinism)}
    values = {k: v for k, v in data.items() if k in known}
    if isinstance(values.get("sdpa_backends"), list):
        values["sdpa_backends"] = tuple(values["sdpa_backends"])
    return Determinism(**values)


def process_environment(seed: int, det: Determinism) -> dict[str, str]:
    """Variables that must be set before an interpreter or CUDA context starts."""
    env = {
        "PYTHONHASHSEED": str(seed),
        "CUBLAS_WORKSPACE_CONFIG": det.cublas_workspace_config,
        "NVTE_ALLOW_NONDETERMINISTIC_ALGO": "0",
        "NCCL_ALGO": det.nccl_algo,
        # The thread count must not follow the machine's load: dynamic adjustment changes how
        # reductions are split, and with it the rounding.
        "OMP_DYNAMIC": "FALSE",
        "MKL_DYNAMIC": "FALSE",
    }
    if det.cuda_launch_blocking:
        env["CUDA_LAUNCH_BLOCKING"] = "1"
    if det.threads is not None:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[name] = str(det.threads)
    return env


def apply_torch(torch: ModuleType, seed: int, det: Determinism) -> None:
    """Seed torch (CPU and, lazily, every CUDA device) and switch on its deterministic modes."""
    torch.manual_seed(seed)  # also queues the seed for every CUDA device without initialising CUDA
    torch.backends.cudnn.benchmark = det.cudnn_benchmark
    if det.algorithms:
        torch.backends.cudnn.deterministic = True
    _use_deterministic_algorithms(torch, det.algorithms, det.warn_only)
    torch.backends.cuda.matmul.allow_tf32 = det.tf32
    torch.backends.cudnn.allow_tf32 = det.tf32
    torch.set_float32_matmul_precision("high" if det.tf32 else "highest")
    torch.backends.mkldnn.enabled = det.onednn
    if det.sdpa_backends is not None:
        _allow_sdpa_backends(torch, det.sdpa_backends)
    import torch.utils.deterministic

    torch.utils.deterministic.fill_uninitialized_memory = det.fill_uninitialized_memory
    if det.threads is not None:
        torch.set_num_threads(det.threads)
        # Fixed for good once parallel work has started; OMP_NUM_THREADS covers that case.
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(det.threads)


INDUCTOR_CONFIG = "torch._inductor.config"


def _use_deterministic_algorithms(torch: ModuleType, mode: bool, warn_only: bool) -> None:
    """`torch.use_deterministic_algorithms`, less its import of Inductor's config: that import loads
    about 800 modules (sympy among them), 1.5 to 2.5 s of CPU in every process that imports torch,
    for a job that may never compile. torch's own flag is set at once, and Inductor's copy of it the
    moment the job imports Inductor (torch.compile does), as the public call would have left it."""
    set_flag = getattr(torch._C, "_set_deterministic_algorithms", None)
    if set_flag is None:  # a torch without the private setter: the public call, import and all
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
        return
    set_flag(mode, warn_only=warn_only)
    when_imported(INDUCTOR_CONFIG, lambda config: setattr(config, "deterministic", mode))


def _allow_sdpa_backends(torch: ModuleType, allowed: tuple[str, ...]) -> None:
    """Switch each attention kernel PyTorch has on or off (a build without one lacks its switch)."""
    switches = {
        "flash": "enable_flash_sdp",
        "efficient": "enable_mem_efficient_sdp",
        "cudnn": "enable_cudnn_sdp",
        "math": "enable_math_sdp",
    }
    for name, switch in switches.items():
        enable = getattr(torch.backends.cuda, switch, None)
        if enable is not None:
            enable(name in allowed)


def after_torch_import(torch: ModuleType) -> None:
    """Optional guest features that only make sense once the job uses torch."""
    run_dir = os.environ.get(settings.RUN_DIR)
    if run_dir and os.environ.get(settings.AUDIT) == "1":
        from reprobox.guest import audit_hook

        audit_hook.install(Path(run_dir) / settings.GUEST_STATE / settings.AUDIT_FILE)
    if os.environ.get(settings.TRAIL_EVERY) or os.environ.get(settings.MAX_STEPS):
        from reprobox.guest import trail

        trail.install_step_hook(torch)
    if run_dir and _is_main_process():
        atexit.register(_write_fingerprint, Path(run_dir))


def _is_main_process() -> bool:
    """False in multiprocessing children (DataLoader workers); their parent records the fingerprint."""
    import multiprocessing

    return multiprocessing.parent_process() is None


def fingerprint_path(run_dir: Path, rank: str) -> Path:
    return run_dir / settings.GUEST_STATE / f"fingerprint-rank{rank}.json"


def _write_fingerprint(run_dir: Path) -> None:
    """At exit of a job process that used torch: record the stack as that process saw it."""
    if "RANK" not in os.environ and "torch.distributed.run" in sys.modules:
        return  # torchrun's agent trains nothing; every rank it started records its own fingerprint
    from reprobox.guest import fingerprint

    rank = os.environ.get("RANK", "0")
    target = fingerprint_path(run_dir, rank)
    try:
        write_json_atomic(target, fingerprint.collect(), indent=None, mode=None)
    except Exception:  # noqa: BLE001 - a probe must not turn a finished job into a crash
        return
