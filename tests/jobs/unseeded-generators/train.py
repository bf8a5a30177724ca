"""Weights from NumPy and Python generators created without a seed, and from their global generators
reseeded from the OS.

None of this is truly random: under reprobox every such generator is seeded from the job seed. (torch's
own generators and DataLoader workers are contained by the same startup hook; test_entropy.py runs them.)
"""

import os
import random
from pathlib import Path

import numpy as np

random.seed()  # reseeds the global generators from the OS, then draws from them
np.random.seed()
weights = {
    "main": np.concatenate(
        [
            np.random.default_rng().standard_normal(4),
            np.random.Generator(np.random.PCG64()).standard_normal(4),
            np.random.default_rng(np.random.SeedSequence()).standard_normal(4),
            np.array([random.Random().random() for _ in range(4)]),
        ]
    ),
    "global": np.array([random.random() for _ in range(4)] + list(np.random.rand(4))),
    "legacy": np.random.RandomState().rand(4),
}
out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
for name, array in weights.items():
    np.save(out / f"{name}.npy", array.astype(np.float32))
