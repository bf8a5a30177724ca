"""Refuses to run at any world size but 2 (torchrun's WORLD_SIZE); at 2, each rank saves what it computed.

No torch in the ranks: what is tested is how a failed varied run is reported, not training.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
if world != 2:
    raise SystemExit(f"rank {rank}: this job needs world size 2, not {world}")
values = np.random.default_rng(rank).standard_normal(8)
np.save(Path(os.environ["REPROBOX_OUTPUT_DIR"]) / f"rank-{rank}.npy", values)
