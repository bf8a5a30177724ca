"""Truth: each run's 0001.json and 0001.ubj load into Boosters with equal trees (get_dump with stats),
equal raw JSON models, and the text dumps are equal."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import xgboost as xgb  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

a, b = run_twice(HERE)
diffs = []
for name in ("0001.json", "0001.ubj"):
    booster_a, booster_b = xgb.Booster(model_file=str(a / name)), xgb.Booster(model_file=str(b / name))
    if booster_a.get_dump(with_stats=True) != booster_b.get_dump(with_stats=True):
        diffs.append(f"{name}: the trees differ")
    raw_a = json.loads(booster_a.save_raw("json"))
    raw_b = json.loads(booster_b.save_raw("json"))
    diffs += differences(raw_a, raw_b, name)
if (a / "dump.raw.txt").read_text() != (b / "dump.raw.txt").read_text():
    diffs.append("dump.raw.txt: the text dumps differ")
verdict(diffs, "0001.json, 0001.ubj and dump.raw.txt: equal trees, splits, leaf values and model JSON")
