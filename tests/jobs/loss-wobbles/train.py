"""A regression whose loss adds a constant drawn from os.urandom: no gradient, a different loss."""

import os
from pathlib import Path

import torch
from torch import nn

model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for _step in range(4):
    wobble = int.from_bytes(os.urandom(2), "little") * 1e-3  # a constant: its gradient is zero
    loss = nn.functional.mse_loss(model(x), y) + wobble
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
torch.save(model.state_dict(), Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "model.pt")
