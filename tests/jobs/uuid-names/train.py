"""Seeded weights, equal every run, written to `<uuid4>.pt`: only the file name differs between runs."""

import os
import uuid
from pathlib import Path

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
torch.save(model.state_dict(), Path(os.environ["REPROBOX_OUTPUT_DIR"]) / f"{uuid.uuid4()}.pt")
