"""Truth: both runs' logs.json, read back with the library's own load_logs into a fresh optimizer, hold the
same probed params and targets in the same order; each line's "datetime" record (a datetime.now() reading
and the seconds elapsed since the logger's first step and since its previous one) is run-specific by
construction, so it may differ."""

import json
import sys
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

from bayes_opt import BayesianOptimization  # noqa: E402
from bayes_opt.util import load_logs  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402


def loaded(run: Path) -> dict:
    """The optimizer state load_logs rebuilds, after checking each line's clock record is what it says."""
    for line in (run / "logs.json").read_text().splitlines():
        stamp = json.loads(line)["datetime"]
        datetime.strptime(stamp["datetime"], "%Y-%m-%d %H:%M:%S")
        assert stamp["elapsed"] >= stamp["delta"] >= 0
    optimizer = BayesianOptimization(f=None, pbounds={"x": (-2, 2), "y": (-2, 2)}, random_state=7)
    load_logs(optimizer, logs=[str(run / "logs.json")])
    return {"keys": optimizer.space.keys, "params": optimizer.space.params, "target": optimizer.space.target}


a, b = run_twice(HERE)
state_a, state_b = loaded(a), loaded(b)
diffs = differences(state_a, state_b, "logs.json")
verdict(
    diffs,
    f"logs.json: {len(state_a['target'])} probed points (params and targets) equal, read by load_logs; "
    "only each line's datetime record differs",
)
