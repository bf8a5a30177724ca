"""Names and values that change between runs, in file names and outputs; planted lines carry a comment."""

# ruff: noqa: PTH103, PTH118, PTH123, PTH208

import json
import os
import socket
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import torch

STAMP = time.strftime("%Y%m%d-%H%M%S")


def save(model: torch.nn.Module, out: Path) -> None:
    torch.save(model.state_dict(), f"model-{STAMP}.pt")  # hazard: run-specific-name
    folder = out / datetime.now().strftime("%H%M")  # hazard: run-specific-name
    torch.save(model.state_dict(), out / f"{uuid.uuid4()}.pt")  # hazard: random-name
    run_id = uuid.uuid4().hex
    os.makedirs(os.path.join(out, run_id))  # hazard: random-name
    with open(os.path.join(out, f"{socket.gethostname()}.log"), "w") as log:  # hazard: run-specific-name
        log.write("started\n")
    scratch = tempfile.mkdtemp()
    with open(out / "config.json", "w") as config:
        json.dump({"work_dir": scratch, "folder": str(folder)}, config)  # hazard: random-name
        print(os.getpid(), file=config)  # hazard: run-specific-name
    with tempfile.TemporaryDirectory() as tmp:
        (out / "paths.txt").write_text(tmp)  # hazard: random-name


def quiet(model: torch.nn.Module, out: Path, started: float, samples: int) -> None:
    """Run-specific values kept out of names and outputs, or where they cannot differ."""
    elapsed = time.time() - started
    with open(out / "metrics.json", "w") as metrics:
        json.dump({"elapsed": elapsed, "samples_per_second": samples / (time.time() - started)}, metrics)
    torch.save(model.state_dict(), os.path.join(tempfile.mkdtemp(), "scratch.pt"))
    print(socket.gethostname(), uuid.uuid4())
    print(os.getpid(), file=sys.stderr)
    files = len(os.listdir(tempfile.gettempdir()))
    parent = str(Path(tempfile.mkdtemp()).parent)
    with open(out / "counts.json", "w") as counts:
        json.dump({"files": files, "tmp_parent": parent}, counts)


def named(model: torch.nn.Module, STAMP: str) -> None:
    torch.save(model.state_dict(), f"model-{STAMP}.pt")  # a parameter, not the module's clock
