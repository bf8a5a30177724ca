"""Deterministic training until optimizer step DIVERGE_AT, where os.urandom nudges one layer's gradient.

Steps count from 1: the nudge is applied to the gradient used by step DIVERGE_AT, so that step's
parameters are the first that differ between two runs, and only in `head.weight`.
"""

import os
from pathlib import Path

import torch
from torch import nn

diverge_at = int(os.environ.get("DIVERGE_AT", "20"))
steps = int(os.environ.get("STEPS", "60"))
hidden = int(os.environ.get("HIDDEN", "32"))  # benchmarks make the steps heavier
features = int(os.environ.get("FEATURES", "16"))
batch = int(os.environ.get("BATCH", "256"))
model = nn.Sequential()
model.add_module("body", nn.Linear(features, hidden))
model.add_module("act", nn.Tanh())
model.add_module("head", nn.Linear(hidden, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
inputs, targets = torch.randn(batch, features), torch.randint(0, 4, (batch,))

for step in range(1, steps + 1):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(inputs), targets)
    loss.backward()
    if step == diverge_at:
        noise = int.from_bytes(os.urandom(2), "little") + 1
        model.head.weight.grad[0, 0] += noise * 1e-3
    optimizer.step()

torch.save(model.state_dict(), Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "model.pt")
