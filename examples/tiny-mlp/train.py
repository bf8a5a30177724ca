"""Train a small MLP on synthetic data, with the usual sources of run-to-run variation.

Nothing here is seeded: weight init and the data come from torch's global RNG, the DataLoader
shuffles with two worker processes, each sample gets NumPy noise as augmentation, and the label map
is built by iterating a set of strings (its order follows PYTHONHASHSEED).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SPECIES = ["cat", "dog", "bird", "fish", "frog", "horse", "mouse", "snake"]
FEATURES = 32


class NoisyPoints(Dataset[tuple[torch.Tensor, int]]):
    """Gaussian clusters, one per label, with NumPy noise added on every read."""

    def __init__(self, size: int, label_map: dict[str, int]) -> None:
        self.labels = torch.randint(0, len(label_map), (size,))
        centres = torch.randn(len(label_map), FEATURES) * 0.3
        self.points = centres[self.labels] + torch.randn(size, FEATURES)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        noise = np.random.normal(0.0, 0.05, FEATURES).astype(np.float32)
        return self.points[index] + torch.from_numpy(noise), int(self.labels[index])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=2048)
    args = parser.parse_args()

    label_map = {name: index for index, name in enumerate(set(SPECIES))}
    data = NoisyPoints(args.samples, label_map)
    loader = DataLoader(data, batch_size=64, shuffle=True, num_workers=2)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, len(label_map)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        total = 0.0
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch + 1}: mean loss {total / len(loader):.4f}", flush=True)

    output_dir = Path(os.environ.get("REPROBOX_OUTPUT_DIR", "out"))
    output_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "config": {"epochs": args.epochs, "label_map": label_map, "output_dir": str(output_dir)},
    }
    torch.save(checkpoint, output_dir / "model.pt")
    print(f"saved {output_dir / 'model.pt'}")


if __name__ == "__main__":
    main()
