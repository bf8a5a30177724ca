"""Truth: both runs' pipeline.joblib, loaded with joblib, hold the same fitted steps (SMOTE, PCA, the
k-nearest-neighbours classifier: every attribute) and give the same predictions on the page's test split."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import joblib  # noqa: E402
import numpy as np  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402
from values import differences  # noqa: E402

a, b = run_twice(HERE)
pipe_a, pipe_b = joblib.load(a / "pipeline.joblib"), joblib.load(b / "pipeline.joblib")
diffs = []
for (name, step_a), (_, step_b) in zip(pipe_a.steps, pipe_b.steps, strict=True):
    diffs += differences(vars(step_a), vars(step_b), f"pipeline.joblib: {name}")
X, _ = make_classification(
    n_classes=2,
    class_sep=2,
    weights=[0.1, 0.9],
    n_informative=3,
    n_redundant=1,
    flip_y=0,
    n_features=20,
    n_clusters_per_class=1,
    n_samples=1000,
    random_state=10,
)
if not np.array_equal(pipe_a.predict_proba(X), pipe_b.predict_proba(X)):
    diffs.append("pipeline.joblib: predict_proba differs")
verdict(
    diffs,
    "pipeline.joblib: every attribute of SMOTE, PCA and the classifier, and their predictions, are equal",
)
