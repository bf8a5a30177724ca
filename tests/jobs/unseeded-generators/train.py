"""Weights from generators created without a seed, in the main process and in DataLoader workers.

None of this is truly random: under reprobox every such generator is seeded from the job seed.
"""

import os
import random
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


def unseeded_draws() -> torch.Tensor:
    rng = np.random.default_rng()
    py = random.Random()
    gen = torch.Generator()
    gen.seed()
    return torch.cat(
        [
            torch.from_numpy(rng.standard_normal(4).astype(np.float32)),
            torch.tensor([py.random() for _ in range(4)], dtype=torch.float32),
            torch.randn(4, generator=gen),
        ]
    )


class Draws(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> torch.Tensor:
        return unseeded_draws()


if __name__ == "__main__":
    torch.seed()  # reseeds the global generator, then draws from it
    state = {
        "main.weight": unseeded_draws(),
        "global.weight": torch.randn(8),
        "legacy.weight": torch.from_numpy(np.random.RandomState().rand(4)),
        "workers.weight": torch.stack(list(DataLoader(Draws(), batch_size=None, num_workers=2))),
    }
    torch.save(state, Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "model.pt")
