"""A script that names its work as Ray Tune does: an experiment id cut from a ``uuid1`` (its first five hex
digits, then a trial counter), trial folders named by that id and the ``datetime.now()`` they were made,
each holding a result with its ``trial_id`` and ``logdir``, and a runner state that keeps a
``time.monotonic()`` reading; its model is a NumPy array, equal every run. ``CONTROL=seeded-id`` makes
one value really differ: a trial id of the same shape drawn from a generator seeded from os.urandom,
which no uuid1 of the run begins with."""

import json
import os
import random
import time
import uuid
from datetime import datetime
from pathlib import Path

import numpy as np

out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
prefix = str(uuid.uuid1().hex)[:5] + "_"  # Ray's BasicVariantGenerator
weights = np.random.default_rng(0).standard_normal(8)
stopped = float("inf")
for index, width in enumerate((4, 8)):
    trial_id = f"{prefix}{index:05d}"
    folder = out / f"objective_{trial_id}_{index}_width={width}_{datetime.now():%Y-%m-%d_%H-%M-%S}"
    folder.mkdir()
    if os.environ.get("CONTROL") == "seeded-id" and index == 1:
        trial_id = f"{random.Random(os.urandom(8)).getrandbits(20):05x}_{index:05d}"
    score = float((weights[:width] ** 2).sum())
    result = {"score": score, "trial_id": trial_id, "logdir": folder.name}
    (folder / "result.json").write_text(json.dumps(result))
    np.save(folder / "weights.npy", weights[:width])
    stopped = min(stopped, time.monotonic())  # Ray's _earliest_stopping_actor
session = f"{datetime.now():%Y-%m-%d_%H-%M-%S}"
state = {"runner_data": {"_earliest_stopping_actor": stopped, "_session_str": session}}
(out / f"experiment_state-{session}.json").write_text(json.dumps(state))
