"""A training script as many are written: nothing seeded, the checkpoint saved next to the code.

It has no job file: docs/getting-started.md runs `reprobox init -- python train.py` here, then
`reprobox verify job.yaml`. Run it twice with plain Python and the weights differ; under reprobox they
are bit-identical.
"""

from __future__ import annotations

import torch
from torch import nn


def main() -> None:
    inputs = torch.randn(512, 8)
    targets = inputs.sum(dim=1, keepdim=True).sin()
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Dropout(0.1), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(1, 201):
        batch = torch.randint(0, len(inputs), (64,))
        loss = nn.functional.mse_loss(model(inputs[batch]), targets[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
