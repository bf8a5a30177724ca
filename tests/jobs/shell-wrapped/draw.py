"""Record what each RNG gives, the hash seed, and the torch flags this process sees."""

import json
import os
import random
import sys
from pathlib import Path

import numpy as np
import torch

record = {
    "random": random.random(),
    "numpy": float(np.random.rand()),
    "torch": float(torch.rand(1)),
    "hash_order": list({"alpha", "beta", "gamma", "delta", "epsilon"}),
    "deterministic": torch.are_deterministic_algorithms_enabled(),
    "cudnn_deterministic": torch.backends.cudnn.deterministic,
    "cudnn_benchmark": torch.backends.cudnn.benchmark,
    "tf32": torch.backends.cuda.matmul.allow_tf32,
    "pythonhashseed": os.environ.get("PYTHONHASHSEED"),
    "cublas": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
}
Path(os.environ["REPROBOX_OUTPUT_DIR"], f"{sys.argv[1]}.json").write_text(json.dumps(record, sort_keys=True))
