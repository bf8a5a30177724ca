"""A seed derived from the host name, as cluster scripts do to give each node its own stream."""

import os
import socket
import zlib
from pathlib import Path

import torch
from torch import nn

torch.manual_seed(zlib.crc32(socket.gethostname().encode()))
model = nn.Linear(4, 1)
out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
torch.save(model.state_dict(), out / "model.pt")
