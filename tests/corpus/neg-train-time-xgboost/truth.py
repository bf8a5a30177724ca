"""Truth: model.json loads (xgb.Booster) into equal trees but a different train_time attribute:
a number the script computes from os.urandom, no duration, so the saved values differ."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import xgboost as xgb  # noqa: E402
from runner import run_twice, verdict  # noqa: E402

a, b = run_twice(HERE)
booster_a, booster_b = (
    xgb.Booster(model_file=str(a / "model.json")),
    xgb.Booster(model_file=str(b / "model.json")),
)
diffs = []
if booster_a.get_dump(with_stats=True) != booster_b.get_dump(with_stats=True):
    diffs.append("model.json: the trees differ")
if booster_a.attributes() != booster_b.attributes():
    diffs.append(f"model.json attributes: {booster_a.attributes()} != {booster_b.attributes()}")
verdict(diffs, "model.json: equal trees and attributes")
