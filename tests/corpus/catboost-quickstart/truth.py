"""Truth: model.cbm loads (CatBoost's load_model) into equal trees and predictions, with metadata equal
but for train_finish_time and model_guid; catboost_info's logs equal but for CatBoost's timings."""

import csv
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import numpy as np  # noqa: E402
from catboost import CatBoostClassifier  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader  # noqa: E402
from values import differences  # noqa: E402

RUN_SPECIFIC_METADATA = {"train_finish_time", "model_guid"}  # a clock stamp and a random id
TIMINGS = {"passed_time", "remaining_time", "Passed", "Remaining"}  # durations CatBoost measures


def model(run: Path) -> tuple[dict, dict, np.ndarray]:
    loaded = CatBoostClassifier()
    loaded.load_model(str(run / "model.cbm"))
    with tempfile.TemporaryDirectory() as tmp:
        loaded.save_model(f"{tmp}/model.json", format="json")
        as_json = json.loads(Path(f"{tmp}/model.json").read_text())
    as_json.pop("model_info", None)  # the metadata, compared below without its stamps
    metadata = {k: v for k, v in dict(loaded.get_metadata()).items() if k not in RUN_SPECIFIC_METADATA}
    rows = np.array([[2, 4, 6, 8], [1, 4, 50, 60], [30, 40, 50, 60]])
    return as_json, metadata, loaded.predict_proba(rows)


def tsv(path: Path) -> list[dict]:
    with path.open() as f:
        return [
            {k: v for k, v in row.items() if k not in TIMINGS} for row in csv.DictReader(f, delimiter="\t")
        ]


def training_json(path: Path) -> dict:
    data = json.loads(path.read_text())
    for item in data["iterations"]:
        for key in TIMINGS:
            item.pop(key, None)
    return data


def events(path: Path) -> list:
    return [
        (e.step, [(v.tag, v.simple_value, v.tensor.SerializeToString()) for v in e.summary.value])
        for e in EventFileLoader(str(path)).Load()
    ]


a, b = run_twice(HERE)
diffs = differences(model(a), model(b), "model.cbm")
info = "catboost_info"
diffs += differences(tsv(a / info / "learn_error.tsv"), tsv(b / info / "learn_error.tsv"), "learn_error.tsv")
diffs += differences(tsv(a / info / "time_left.tsv"), tsv(b / info / "time_left.tsv"), "time_left.tsv")
diffs += differences(
    training_json(a / info / "catboost_training.json"),
    training_json(b / info / "catboost_training.json"),
    "catboost_training.json",
)
diffs += differences(
    events(a / info / "learn/events.out.tfevents"),
    events(b / info / "learn/events.out.tfevents"),
    "events.out.tfevents",
)
verdict(
    diffs,
    "model.cbm: equal trees, predictions and metadata but train_finish_time and model_guid; "
    "catboost_info: equal losses, only CatBoost's own timings and event wall times differ",
)
