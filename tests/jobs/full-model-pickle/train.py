"""Saves the whole model object (`torch.save(model)`), which needs the class to load: a full pickle."""

import os
from pathlib import Path

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))

    def forward(self, x):
        return self.body(x)


model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(128, 8), torch.randint(0, 2, (128,))
for _ in range(20):
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
torch.save(model, Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "model.pt")
