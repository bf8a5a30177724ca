"""The CUDA image without a CUDA base image (`--cuda`): torch's CUDA wheels carry CUDA itself.

The CUDA lock pins torch's CUDA build together with the nvidia-* wheels it loads its CUDA runtime,
cuBLAS, cuDNN and NCCL from (rpaths into site-packages/nvidia/), so the image needs no CUDA in its base:
the CUDA lock installed on the offline base (Debian and python3) is the whole CUDA stack, and a machine
that cannot pull the pinned CUDA base builds it from a wheelhouse, as an air-gapped GPU cluster would.
The driver is in no image: on a GPU machine the NVIDIA Container Toolkit mounts the host's into the
container.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from reprobox.errors import UsageError
from reprobox.image._wheelhouse import LOCKS
from reprobox.image.offline_base import DEFAULT_TAG
from reprobox.jobfile import ImageSpec
from reprobox.offline import BASE_IMAGE_VARIABLE

CUDA_LOCK = "cuda"
OFFLINE_BASE_VARIABLE = "REPROBOX_OFFLINE_BASE"  # the offline base's tag, as `reprobox offline-base` names it


def cuda_build(
    spec: ImageSpec | None,
    *,
    base_image: str | None,
    lock: str | None,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """(base image, lock) of the CUDA image: the CUDA lock on the base asked for (the flag, the job
    file, then REPROBOX_BASE_IMAGE), else on the offline base rather than the pinned CUDA base."""
    environ = os.environ if environ is None else environ
    if lock is not None and LOCKS.get(lock, lock) != LOCKS[CUDA_LOCK]:
        raise UsageError(
            f"--cuda installs {LOCKS[CUDA_LOCK]}, and --lock asks for {lock}; drop one of the two flags"
        )
    base = (
        base_image
        or (spec.base if spec is not None else None)
        or environ.get(BASE_IMAGE_VARIABLE)
        or environ.get(OFFLINE_BASE_VARIABLE)
        or DEFAULT_TAG
    )
    return base, CUDA_LOCK
