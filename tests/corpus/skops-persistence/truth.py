"""Truth: both runs' my-model.skops, loaded with skops.io.load (trusting what get_untrusted_types
lists, as skops' page does), hold the same GridSearchCV: equal parameters, scores, ranks, splits, the
refitted XGBClassifier's booster (its raw UBJSON model) and predictions, but for the fit and score
durations scikit-learn measures with time.time() (cv_results_'s mean/std_fit_time and
mean/std_score_time, and refit_time_), which are run-specific. The file's own layout (member names
from id() and uuid4, the zip's dates) is not a value of the model and is not compared."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import numpy as np  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from sklearn.datasets import load_iris  # noqa: E402
from skops.io import get_untrusted_types, load  # noqa: E402
from values import differences  # noqa: E402

TIMINGS = ["mean_fit_time", "std_fit_time", "mean_score_time", "std_score_time"]


def loaded(run: Path):
    path = run / "my-model.skops"
    return load(path, trusted=get_untrusted_types(file=path))


def search_state(search) -> dict:
    state = dict(search.__getstate__())
    assert state.pop("refit_time_") > 0
    state["cv_results_"] = {k: v for k, v in state["cv_results_"].items() if k not in TIMINGS}
    for name in ("estimator", "best_estimator_"):
        model = state.pop(name)
        params = model.get_params()
        state[f"{name}.params"] = params
        if hasattr(model, "_Booster"):
            state[f"{name}.booster"] = bytes(model.get_booster().save_raw(raw_format="ubj"))
            state[f"{name}.attributes"] = {
                k: v for k, v in vars(model).items() if k != "_Booster" and k not in params
            }
    return state


a, b = run_twice(HERE)
search_a, search_b = loaded(a), loaded(b)
diffs = differences(search_state(search_a), search_state(search_b), "my-model.skops")
X, _ = load_iris(return_X_y=True)
if not np.array_equal(search_a.predict_proba(X), search_b.predict_proba(X)):
    diffs.append("my-model.skops: predict_proba differs")
verdict(
    diffs,
    "my-model.skops: equal search results, splits, parameters, refitted booster and predictions; "
    "only the measured fit/score times differ",
)
