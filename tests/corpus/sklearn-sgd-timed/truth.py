"""Truth: coef.npy (np.load) equal; metrics.jsonl (json) equal in epoch and accuracy; epoch_time is a
measured duration and run_id a uuid4 hex (both run-specific by construction), so they may differ."""

import json
import sys
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import numpy as np  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402


def metrics(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        assert uuid.UUID(row.pop("run_id")).version == 4 and row.pop("epoch_time") > 0
    return rows


a, b = run_twice(HERE)
diffs = differences(metrics(a), metrics(b), "metrics.jsonl")
if not np.array_equal(np.load(a / "coef.npy"), np.load(b / "coef.npy")):
    diffs.append("coef.npy differs")
verdict(
    diffs,
    "coef.npy and metrics.jsonl's accuracies equal; only the measured epoch_time and the uuid4 run_id differ",
)
