"""Truth: both runs' dqn_policy.pt load (torch.load, weights_only=True) into equal state_dicts, and the
CSVLogger's scalar files (training_loop/dqn/scalars/*.csv, read with the csv module) hold equal steps
and values. The tutorial seeds torch and the environment itself."""

import csv
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402


def scalars(run: Path) -> dict:
    folder = run / "training_loop" / "dqn" / "scalars"
    return {
        p.name: [(int(s), float(v)) for s, v in csv.reader(p.open())] for p in sorted(folder.glob("*.csv"))
    }


a, b = run_twice(HERE, timeout=600)
state_a = torch.load(a / "dqn_policy.pt", weights_only=True)
state_b = torch.load(b / "dqn_policy.pt", weights_only=True)
diffs = [f"dqn_policy.pt: {k} differs" for k in state_a if not torch.equal(state_a[k], state_b[k])]
if set(state_a) != set(state_b):
    diffs.append("dqn_policy.pt: different parameter names")
logged_a, logged_b = scalars(a), scalars(b)
diffs += differences(logged_a, logged_b, "training_loop/dqn/scalars")
verdict(
    diffs,
    f"dqn_policy.pt: equal state_dict ({len(state_a)} tensors); scalars {sorted(logged_a)}: "
    f"{sum(map(len, logged_a.values()))} equal rows",
)
