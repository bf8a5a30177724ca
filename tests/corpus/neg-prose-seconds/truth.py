"""Truth: coef.npy (np.load) and the card's accuracy are equal, but README.md's training seconds differ
and are no measured duration (the script computes them from os.urandom): the runs' outputs differ."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import numpy as np  # noqa: E402
from runner import run_twice, verdict  # noqa: E402

a, b = run_twice(HERE)
lines_a = (a / "README.md").read_text().splitlines()
lines_b = (b / "README.md").read_text().splitlines()
diffs = []
if len(lines_a) != len(lines_b):
    diffs.append(f"README.md: {len(lines_a)} vs {len(lines_b)} lines")
for i, (x, y) in enumerate(zip(lines_a, lines_b, strict=False)):
    if x != y:
        diffs.append(f"README.md line {i + 1}: {x!r} vs {y!r}")
if not np.array_equal(np.load(a / "coef.npy"), np.load(b / "coef.npy")):
    diffs.append("coef.npy differs")
verdict(diffs, "README.md and coef.npy: every line and value equal")
