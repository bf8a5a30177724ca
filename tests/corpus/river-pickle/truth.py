"""Truth: both runs' model.pkl, loaded with pickle as River's FAQ loads it, hold the same pipeline: the
StandardScaler's counts, means and variances and the LogisticRegression's weights, intercept and
optimizer state, and equal predictions on the Phishing data. Nothing in it is random or timed."""

import pickle
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

from river import datasets  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402


def pipeline(run: Path):
    with (run / "model.pkl").open("rb") as f:
        return pickle.load(f)


def steps(model) -> dict:
    return {name: vars(step) for name, step in model.steps.items()}


a, b = run_twice(HERE)
model_a, model_b = pipeline(a), pipeline(b)
diffs = differences(steps(model_a), steps(model_b), "model.pkl")
samples = [x for x, _ in datasets.Phishing()]
proba_a = [model_a.predict_proba_one(x) for x in samples]
proba_b = [model_b.predict_proba_one(x) for x in samples]
diffs += differences(proba_a, proba_b, "model.pkl predict_proba_one")
verdict(
    diffs,
    f"model.pkl: equal scaler statistics, weights and optimizer state; {len(samples)} equal predictions",
)
