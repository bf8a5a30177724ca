"""A paper-style job: train a small classifier, report its validation accuracy in metrics.json.

Gradients are accumulated over one micro-batch per intra-op thread, so the weights' last bits follow
torch.get_num_threads(); the accuracy the paper reports does not. The script seeds nothing: reprobox
seeds every generator with the job's seed, so `verify --seeds N` gives N different draws of data and
initial weights.
"""

import json
import os
from pathlib import Path

import torch
from torch import nn

teacher = torch.randn(8, 2)
x = torch.randn(640, 8)
y = (x @ teacher).argmax(dim=1)
train_x, train_y, val_x, val_y = x[:512], y[:512], x[512:], y[512:]

model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.5)
micro_batches = torch.get_num_threads()
for _epoch in range(30):
    opt.zero_grad()
    for xb, yb in zip(train_x.chunk(micro_batches), train_y.chunk(micro_batches), strict=True):
        loss = nn.functional.cross_entropy(model(xb), yb) / micro_batches
        loss.backward()
    opt.step()

with torch.no_grad():
    logits = model(val_x)
    val_acc = (logits.argmax(dim=1) == val_y).float().mean().item()
    val_loss = nn.functional.cross_entropy(logits, val_y).item()

out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
torch.save(model.state_dict(), out / "model.pt")
(out / "metrics.json").write_text(json.dumps({"val_acc": round(val_acc, 4), "val_loss": val_loss}))
print(f"after 30 epochs: val_acc={val_acc:.4f}")
