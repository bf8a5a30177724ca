"""Truth: both runs' filename.joblib, loaded with joblib, hold the same estimator state and predictions."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import joblib  # noqa: E402
import numpy as np  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from sklearn import datasets  # noqa: E402
from values import differences  # noqa: E402

a, b = run_twice(HERE)
model_a, model_b = joblib.load(a / "filename.joblib"), joblib.load(b / "filename.joblib")
diffs = differences(model_a.__getstate__(), model_b.__getstate__(), "filename.joblib")
X, _ = datasets.load_iris(return_X_y=True)
if not np.array_equal(model_a.predict_proba(X), model_b.predict_proba(X)):
    diffs.append("filename.joblib: predict_proba differs")
verdict(diffs, "filename.joblib: every attribute of the estimator and its predictions are equal")
