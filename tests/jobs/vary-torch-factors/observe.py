"""What torch makes of the factors that reach it: the thread count it uses and the CPU capability it
dispatches to (set by the guest before the job imports torch, or torch would never see them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

observed = {"threads": torch.get_num_threads(), "cpu-isa": torch.backends.cpu.get_cpu_capability()}
folder = Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "observed"
folder.mkdir()
for factor, value in observed.items():
    (folder / f"{factor}.json").write_text(json.dumps(value) + "\n")
