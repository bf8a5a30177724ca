"""Truth: my_trials.pkl, loaded with pickle as Hyperopt's page loads it, holds the same 100 trials in both
runs (each trial's tid, state, sampled x, loss and status), but for each trial's book_time and
refresh_time (readings of the clock, hyperopt's coarse_utcnow). fmin is given no rstate and
HYPEROPT_FMIN_SEED is unset, so TPE draws from numpy.random.default_rng() created without a seed: reprobox
seeds such a generator from the job's seed, and the truth seeds it from outside likewise
(seed_unseeded), so the sampled points depend on that seed. Left unseeded, they differ in every run."""

import datetime
import pickle
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

STAMPS = ("book_time", "refresh_time")


def trials_state(run: Path) -> dict:
    with (run / "my_trials.pkl").open("rb") as f:
        trials = pickle.load(f)
    state = dict(vars(trials))
    for key in ("_trials", "_dynamic_trials"):
        docs = []
        for saved in state[key]:
            doc = dict(saved)
            for stamp in STAMPS:
                assert isinstance(doc.pop(stamp), datetime.datetime)
            docs.append(doc)
        state[key] = docs
    state["_ids"] = sorted(state["_ids"])
    return state


a, b = run_twice(HERE, seed_unseeded=True)
state_a, state_b = trials_state(a), trials_state(b)
diffs = differences(state_a, state_b, "my_trials.pkl")
verdict(
    diffs,
    f"my_trials.pkl: {len(state_a['_trials'])} trials with equal x, losses and states "
    "(only book_time and refresh_time, clock readings, differ)",
)
