"""Saves a checkpoint, then fills the disk holding its outputs to the last byte (FILL says when).

FILL=exit: fill, then exit 0. FILL=log: fill, then keep logging. FILL=trail: train with a trail and
fill the disk after step 3, so that the trail soon finds no room for its next line. FILL=all: remove
the bytes reprobox set aside for the guest's record first, then fill. The checkpoint is saved first:
model.pt by torch for FILL=trail (the trail is torch's optimizer hook), else model.npy by NumPy.
"""

import os
import sys
from pathlib import Path

import numpy as np

mode = os.environ.get("FILL", "exit")
outputs = Path(os.environ["REPROBOX_OUTPUT_DIR"])


def fill(target: Path) -> None:
    """Write until not one more byte fits: big chunks first, then smaller ones down to one byte."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        chunk = 1 << 20
        while chunk:
            try:
                while True:
                    if os.write(fd, b"\0" * chunk) < chunk:
                        break
            except OSError:
                pass
            chunk //= 2
    finally:
        os.close(fd)


if mode == "trail":
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.save(model.state_dict(), outputs / "model.pt")
    for step in range(1, 101):
        optimizer.zero_grad()
        model(torch.ones(3, 4)).sum().backward()
        optimizer.step()
        if step == 3:
            fill(outputs / "filler.bin")
else:
    np.save(outputs / "model.npy", np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32))
if mode == "all":
    (Path(os.environ["REPROBOX_RUN_DIR"]) / ".reprobox" / ".reprobox-reserve").unlink()
if mode != "trail":
    fill(outputs / "filler.bin")
if mode == "log":
    for line in range(2000):
        print(f"still logging, line {line} " + "." * 60, flush=True)
print("done", file=sys.stderr)
