"""Seeds every generator the corpus's libraries expose, from outside the script, before it runs.

The corpus's truth runs put this folder first on PYTHONPATH, so every Python process of a run (a
notebook's kernel too) starts with the same seeds. Torch is seeded only where the case asks
(TRUTH_SEED_TORCH=1): importing it costs seconds the other cases need not pay. Where the case asks
(TRUTH_SEED_UNSEEDED=1), NumPy's default_rng() called without a seed is seeded too, as reprobox seeds
generators created without one.
"""

import os
import random

_SEED = int(os.environ.get("TRUTH_SEED", "0"))
random.seed(_SEED)
try:
    import numpy

    numpy.random.seed(_SEED)
    if os.environ.get("TRUTH_SEED_UNSEEDED") == "1":
        # reprobox gives a generator created without a seed one derived from the job's seed; the truth
        # does the same from outside, its own way: the n-th default_rng() of a process gets (seed, n).
        import itertools

        _unseeded = itertools.count()
        _default_rng = numpy.random.default_rng

        def _default_rng_seeded(seed=None):
            return _default_rng([_SEED, next(_unseeded)] if seed is None else seed)

        numpy.random.default_rng = _default_rng_seeded
except ImportError:
    pass
if os.environ.get("TRUTH_SEED_TORCH") == "1":
    import torch

    torch.manual_seed(_SEED)
