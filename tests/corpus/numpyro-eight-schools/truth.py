"""Truth: both runs' samples.npz (np.load, allow_pickle=False) hold equal posterior samples of mu, tau
and theta and equal potential energies, array by array."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import numpy as np  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402


def samples(run: Path) -> dict:
    with np.load(run / "samples.npz", allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


a, b = run_twice(HERE)
samples_a, samples_b = samples(a), samples(b)
diffs = differences(samples_a, samples_b, "samples.npz")
verdict(diffs, f"samples.npz: equal arrays {sorted(samples_a)} ({samples_a['mu'].size} draws each)")
