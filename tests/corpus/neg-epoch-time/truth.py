"""Truth: coef.npy (np.load) and accuracies equal, but metrics.jsonl's epoch_time differs and is no
measured duration (the script computes it from os.urandom): the runs' saved values differ."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import numpy as np  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

a, b = run_twice(HERE)
rows_a = [json.loads(line) for line in (a / "metrics.jsonl").read_text().splitlines()]
rows_b = [json.loads(line) for line in (b / "metrics.jsonl").read_text().splitlines()]
diffs = differences(rows_a, rows_b, "metrics.jsonl")
if not np.array_equal(np.load(a / "coef.npy"), np.load(b / "coef.npy")):
    diffs.append("coef.npy differs")
verdict(diffs, "metrics.jsonl and coef.npy: every value equal")
