"""A few SGD steps logged to TensorBoard the way its quickstart does: SummaryWriter() and ./runs."""

import os

import torch
from torch.utils.tensorboard import SummaryWriter

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
noise_at = int(os.environ.get("NOISE_AT_STEP", "-1"))

writer = SummaryWriter()
for step in range(5):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    logged = loss.item()
    if step == noise_at:  # entropy no seed controls
        logged += (1 + int.from_bytes(os.urandom(2), "little")) * 1e-3
    writer.add_scalar("Loss/train", logged, step)
writer.add_histogram("fc.weight", model.weight, 4)
writer.add_scalar("lr", 0.1, 4, new_style=True)  # written as a tensor summary
writer.close()
