"""A job whose reported accuracy follows the thread count: a claim that does not hold on another stack."""

import json
import os
from pathlib import Path

import numpy as np

threads = int(os.environ["OMP_NUM_THREADS"])  # pinned by reprobox: the job file's count or --threads
out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
np.save(out / "model.npy", np.random.default_rng(0).standard_normal(4) * threads)
(out / "metrics.json").write_text(json.dumps({"val": {"acc": 0.70 + 0.05 * threads}}))
