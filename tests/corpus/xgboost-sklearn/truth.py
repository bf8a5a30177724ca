"""Truth: both runs' model.json load (XGBClassifier.load_model) into equal trees, equal model JSON
and equal predictions on all of iris."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import numpy as np  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from sklearn.datasets import load_iris  # noqa: E402
from values import differences  # noqa: E402
from xgboost import XGBClassifier  # noqa: E402

a, b = run_twice(HERE)
model_a, model_b = XGBClassifier(), XGBClassifier()
model_a.load_model(str(a / "model.json"))
model_b.load_model(str(b / "model.json"))
diffs = differences(
    json.loads((a / "model.json").read_text()), json.loads((b / "model.json").read_text()), "model.json"
)
X = load_iris()["data"]
if not np.array_equal(model_a.predict_proba(X), model_b.predict_proba(X)):
    diffs.append("model.json: predict_proba differs")
verdict(diffs, "model.json: equal model JSON (trees, learner parameters) and equal predictions")
