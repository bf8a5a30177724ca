"""Truth: trial by trial (matched by their index, since folder names carry a random experiment id and the
date), result.json, progress.csv, params.json, params.pkl and the event files' scalars are equal but
for Ray's run-specific fields; results.csv (pandas) likewise. Ray's resumption state is not compared:
it is pickled bookkeeping of paths, ids and stamps."""

import csv
import json
import pickle
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import pandas as pd  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader  # noqa: E402
from values import differences  # noqa: E402

RUN_SPECIFIC = {
    "timestamp",
    "date",
    "time_this_iter_s",
    "time_total_s",
    "time_since_restore",
    "pid",
    "hostname",
    "node_ip",
    "trial_id",
    "logdir",
    "",
}


def kept(row: dict) -> dict:
    return {k: v for k, v in row.items() if k.split("/")[-1] not in RUN_SPECIFIC}


def trials(run: Path) -> dict[str, Path]:
    found = {}
    for folder in (run / "ray_results" / "quickstart").iterdir():
        match = re.fullmatch(
            r"objective_[0-9a-f]{5}_(\d{5})_(.*)_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", folder.name
        )
        if match:
            found[match.group(1) + "_" + match.group(2)] = folder
    return found


def scalars(folder: Path) -> list:
    (events,) = folder.glob("events.out.tfevents.*")
    return [
        (
            e.step,
            [(v.tag, v.simple_value) for v in e.summary.value if v.tag.split("/")[-1] not in RUN_SPECIFIC],
        )
        for e in EventFileLoader(str(events)).Load()
        if e.summary.value
    ]


def trial(folder: Path) -> dict:
    with (folder / "progress.csv").open() as f:
        progress = [kept(row) for row in csv.DictReader(f)]
    return {
        "result.json": [kept(json.loads(line)) for line in (folder / "result.json").read_text().splitlines()],
        "progress.csv": progress,
        "params.json": json.loads((folder / "params.json").read_text()),
        "params.pkl": pickle.loads((folder / "params.pkl").read_bytes()),  # our own run's file
        "events": scalars(folder),
    }


a, b = run_twice(HERE, timeout=600)
trials_a, trials_b = trials(a), trials(b)
diffs = differences(sorted(trials_a), sorted(trials_b), "trials")
for key in sorted(set(trials_a) & set(trials_b)):
    diffs += differences(trial(trials_a[key]), trial(trials_b[key]), f"trial {key}")
table_a, table_b = pd.read_csv(a / "results.csv"), pd.read_csv(b / "results.csv")
diffs += differences(
    [kept(r) for r in table_a.to_dict("records")],
    [kept(r) for r in table_b.to_dict("records")],
    "results.csv",
)
verdict(
    diffs,
    f"{len(trials_a)} trials: equal scores, configs and iterations; "
    "only Ray's stamps, durations, ids, pids and host differ",
)
