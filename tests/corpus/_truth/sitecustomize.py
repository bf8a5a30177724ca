"""Seeds every generator the corpus's libraries expose, from outside the script, before it runs.

The corpus's truth runs put this folder first on PYTHONPATH, so every Python process of a run (a
notebook's kernel too) starts with the same seeds. Torch is seeded only where the case asks
(TRUTH_SEED_TORCH=1): importing it costs seconds the other cases need not pay.
"""

import os
import random

_SEED = int(os.environ.get("TRUTH_SEED", "0"))
random.seed(_SEED)
try:
    import numpy

    numpy.random.seed(_SEED)
except ImportError:
    pass
if os.environ.get("TRUTH_SEED_TORCH") == "1":
    import torch

    torch.manual_seed(_SEED)
