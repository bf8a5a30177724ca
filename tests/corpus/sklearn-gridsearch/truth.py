"""Truth: grid_search.joblib (joblib.load) and cv_results.csv (pandas.read_csv) are equal but for the
fit and score durations scikit-learn measures (time.time() differences), which are run-specific."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import joblib  # noqa: E402
import pandas as pd  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

TIMINGS = ["mean_fit_time", "std_fit_time", "mean_score_time", "std_score_time"]


def search_state(run: Path) -> dict:
    state = joblib.load(run / "grid_search.joblib").__getstate__()
    assert state.pop("refit_time_") > 0
    state["cv_results_"] = {k: v for k, v in state["cv_results_"].items() if k not in TIMINGS}
    return state


def table(run: Path) -> dict:
    frame = pd.read_csv(run / "cv_results.csv")
    return frame.drop(columns=TIMINGS).to_dict(orient="list")


a, b = run_twice(HERE)
diffs = differences(search_state(a), search_state(b), "grid_search.joblib")
diffs += differences(table(a), table(b), "cv_results.csv")
verdict(
    diffs,
    "grid_search.joblib and cv_results.csv: equal scores, ranks, parameters and refitted SVC; "
    "only the measured fit/score times differ",
)
