"""A training repository as its authors left it, for the `reprobox init` tests: its own package at the
top, a script in a subfolder run from there, data its git ignores beside the script, outputs written
next to the code, TensorBoard-style event files and a log with the time in them."""

from __future__ import annotations

import subprocess
from pathlib import Path

TRAIN = '''\
"""Trains the repository's model, as its README says: cd scripts && python train.py --steps 3"""
import argparse
import os
import time

import torch

from mypkg.model import make_model

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, required=True)
args = parser.parse_args()
values = [float(v) for v in open("data/values.txt").read().split()]
mode = os.environ.get("TRAIN_MODE", "plain")
token = os.getenv("WANDB_API_KEY")
model = make_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.tensor(values).reshape(-1, 1)
for _ in range(args.steps):
    optimizer.zero_grad()
    model(x).pow(2).mean().backward()
    optimizer.step()
os.makedirs("out", exist_ok=True)
torch.save(model.state_dict(), f"out/model-{mode}.pt")
os.makedirs(f"runs/{time.strftime('%b%d_%H-%M-%S')}_host", exist_ok=True)
event = f"runs/{time.strftime('%b%d_%H-%M-%S')}_host/events.out.tfevents.{time.time()}.host.{os.getpid()}.0"
open(event, "w").write(str(time.time()))
open("train.log", "w").write(f"{time.ctime()} done, token given: {token is not None}\\n")
'''


def make_repo(root: Path) -> Path:
    """A git repository: mypkg/ at its top, scripts/train.py beside a git-ignored data folder."""
    (root / "mypkg").mkdir(parents=True)
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "model.py").write_text(
        "import torch\n\n\ndef make_model():\n    return torch.nn.Linear(1, 1)\n"
    )
    (root / "scripts" / "data").mkdir(parents=True)
    (root / "scripts" / "data" / "values.txt").write_text("1 2 3 4\n")
    (root / "scripts" / "train.py").write_text(TRAIN)
    (root / ".gitignore").write_text("data/\nruns/\nout/\n*.log\n")
    for command in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", *command], cwd=root, check=True)
    return root / "scripts"
