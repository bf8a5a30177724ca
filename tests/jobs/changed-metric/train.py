"""Seeded, equal weights each run; `val_acc` comes from os.urandom, so it differs every run.

It is stored as a plain float in the checkpoint dict and in metrics.json, not as a tensor.
"""

import json
import os
from pathlib import Path

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
val_acc = 0.9 + int.from_bytes(os.urandom(2), "little") / 65536 / 20
torch.save({"epoch": 3, "state_dict": model.state_dict(), "val_acc": val_acc}, out / "ckpt.pt")
(out / "metrics.json").write_text(json.dumps({"epoch": 3, "val_acc": val_acc}))
