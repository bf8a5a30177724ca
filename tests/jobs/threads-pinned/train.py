"""A tiny regression trained with gradient accumulation, one micro-batch per intra-op thread.

Splitting the batch differently sums the gradients in a different order, so the saved weights change
with torch.get_num_threads() (and nothing else).
"""

import os
from pathlib import Path

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(256, 16)
y = x @ torch.randn(16, 1) + 0.1 * torch.randn(256, 1)

micro_batches = torch.get_num_threads()
for _epoch in range(5):
    opt.zero_grad()
    for xb, yb in zip(x.chunk(micro_batches), y.chunk(micro_batches), strict=True):
        loss = nn.functional.mse_loss(model(xb), yb) / micro_batches
        loss.backward()
    opt.step()

out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
torch.save(model.state_dict(), out / "model.pt")
