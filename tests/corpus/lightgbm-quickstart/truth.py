"""Truth: both runs' model.txt load (lgb.Booster(model_file=...)) into equal models: dump_model()'s
trees and parameters, and predictions on the training data."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import lightgbm as lgb  # noqa: E402
import numpy as np  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

a, b = run_twice(HERE)
booster_a, booster_b = (
    lgb.Booster(model_file=str(a / "model.txt")),
    lgb.Booster(model_file=str(b / "model.txt")),
)
diffs = differences(booster_a.dump_model(), booster_b.dump_model(), "model.txt")
X = np.random.default_rng(1).random((200, 10))
if not np.array_equal(booster_a.predict(X), booster_b.predict(X)):
    diffs.append("model.txt: predictions differ")
verdict(diffs, "model.txt: equal trees, parameters and predictions (dump_model)")
