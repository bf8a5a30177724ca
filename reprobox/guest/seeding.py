"""Seeding helpers for job code that wants explicit control (the startup hook already seeds everything).

Follows PyTorch's reproducibility notes: one seed for Python, NumPy and torch (CPU and all CUDA
devices); DataLoader workers reseed NumPy and `random` from torch's per-worker seed; a seeded
`torch.Generator` drives shuffling.
"""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING

from reprobox.guest import settings

if TYPE_CHECKING:
    import torch


def seed_everything(seed: int) -> None:
    """Seed `random`, NumPy's global RNG and torch on every device with `seed`."""
    random.seed(seed)
    try:
        import numpy
    except ImportError:
        pass
    else:
        numpy.random.seed(seed % 2**32)
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(seed)  # seeds all CUDA devices too


def seed_worker(worker_id: int) -> None:
    """`worker_init_fn` for DataLoader: derive NumPy's and Python's seeds from torch's worker seed."""
    import torch

    worker_seed = torch.initial_seed() % 2**32
    random.seed(worker_seed)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(worker_seed)


def generator(seed: int | None = None) -> torch.Generator:
    """A `torch.Generator` seeded with `seed`, or with the job's seed (REPROBOX_SEED, per rank) if None."""
    import torch

    value = settings.seed_for_process(os.environ) if seed is None else seed
    gen = torch.Generator()
    gen.manual_seed(value)
    return gen
