"""Splits a fixed set of chunks among torchrun's ranks (RANK, WORLD_SIZE) and saves each chunk's result under
the chunk's name, never the rank's: the same checkpoints and bits with 2 ranks or 4. Each rank also leaves
ranks/RANK-of-WORLD, outside the job file's checkpoints, as evidence of the ranks that ran.

No torch in the ranks: what is tested is that the larger world reaches the job, not training.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
(out / "ranks").mkdir(exist_ok=True)
(out / "ranks" / f"{rank}-of-{world}").touch()
chunks = np.random.default_rng(0).standard_normal((8, 1000))
for chunk in range(rank, len(chunks), world):
    np.save(out / f"chunk-{chunk}.npy", np.cumsum(chunks[chunk]))
