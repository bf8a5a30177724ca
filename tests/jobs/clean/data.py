"""Synthetic data whose order and augmentation follow only the seeds reprobox sets."""

import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

LABELS = ["bird", "cat", "dog", "fish"]
LABEL_INDEX = {name: index for index, name in enumerate(sorted(set(LABELS)))}
FEATURES = 8


class Clusters(Dataset[tuple[torch.Tensor, int]]):
    """One Gaussian cluster per label, with NumPy and Python noise drawn in the worker on every read."""

    def __init__(self, size: int) -> None:
        self.labels = torch.arange(size) % len(LABEL_INDEX)
        self.points = torch.randn(size, FEATURES) + self.labels.unsqueeze(1).float()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        noise = np.random.normal(0.0, 0.01, FEATURES).astype(np.float32)
        scale = 1.0 + random.uniform(-0.01, 0.01)
        return self.points[index] * scale + torch.from_numpy(noise), int(self.labels[index])


def seed_worker(worker_id: int) -> None:
    """Seed NumPy and `random` in each worker from the per-worker torch seed (PyTorch's notes)."""
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def make_loader(size: int, workers: int) -> DataLoader[tuple[torch.Tensor, int]]:
    shuffle_generator = torch.Generator()
    shuffle_generator.manual_seed(torch.initial_seed())  # follows the job's seed; fixes nothing itself
    return DataLoader(
        Clusters(size),
        batch_size=16,
        shuffle=True,
        num_workers=workers,
        worker_init_fn=seed_worker,
        generator=shuffle_generator,
    )
