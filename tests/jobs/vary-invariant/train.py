"""A tiny seeded regression whose metrics record the data snapshot's date in UTC."""

import json
import os
import time
from pathlib import Path

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randn(8, 1)
for _step in range(3):
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()

out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
torch.save(model.state_dict(), out / "model.pt")
snapshot = time.strftime("%Y-%m-%d %H:%M", time.gmtime(1_700_000_000))
(out / "metrics.json").write_text(json.dumps({"snapshot": snapshot}))
