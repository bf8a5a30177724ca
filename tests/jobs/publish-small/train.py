"""Train a small linear model for a few steps on random data and save its weights."""

from __future__ import annotations

import os
from pathlib import Path

import torch

model = torch.nn.Linear(16, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _step in range(5):
    inputs, targets = torch.randn(32, 16), torch.randn(32, 4)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
output = Path(os.environ.get("REPROBOX_OUTPUT_DIR", "out"))
output.mkdir(parents=True, exist_ok=True)
torch.save(model.state_dict(), output / "model.pt")
print(f"loss {loss.item():.4f}")
