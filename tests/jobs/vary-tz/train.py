"""Trains a tiny model and records the data snapshot's date in local time next to its metrics."""

import json
import os
import time
from pathlib import Path

import torch
from torch import nn

SNAPSHOT_EPOCH = 1_700_000_000  # when the (synthetic) data set was frozen

torch.manual_seed(0)
model = nn.Linear(4, 1)
out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
torch.save(model.state_dict(), out / "model.pt")
metrics = {"snapshot": time.strftime("%Y-%m-%d %H:%M", time.localtime(SNAPSHOT_EPOCH)), "epochs": 1}
(out / "metrics.json").write_text(json.dumps(metrics))
