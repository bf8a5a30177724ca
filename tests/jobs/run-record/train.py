"""A script that saves what its own run measured and drew, each named nothing a list of words knows: a
skorch-like history.json whose epochs hold their duration as ``dur`` (started in one callback, measured in
another), a phase's length in perf_counter seconds, a rate in steps per second, a time in rounded ms, a
log whose lines show the epochs' durations to five decimals, a Keras-like config holding a Python
``id()`` in decimal, an Optuna-like study named by ``uuid4`` and tokens
from ``secrets``; its model is a NumPy array. ``CONTROL`` makes one value really differ: a loss named like
a duration (``loss-named-duration``), or an id computed from a generator seeded from os.urandom
(``seeded-id``)."""

import json
import os
import random
import secrets
import time
import uuid
from pathlib import Path

import numpy as np

out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
control = os.environ.get("CONTROL", "")
noise = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))  # no seed reprobox controls


class History:
    """skorch's way: the epoch's start taken in one callback, its duration in another."""

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []
        self.epoch_start = 0.0

    def on_epoch_begin(self) -> None:
        self.epoch_start = time.time()

    def on_epoch_end(self, loss: float) -> None:
        row = {"epoch": len(self.rows) + 1, "train_loss": loss, "dur": time.time() - self.epoch_start}
        if control == "loss-named-duration":  # a computed number, named like a duration
            row["epoch_time"] = loss * (1 + 1e-3 * float(noise.standard_normal()))
        self.rows.append(row)


class Layer:
    pass


weights = np.random.default_rng(0).standard_normal(16)
history = History()
phase_start = time.perf_counter()
ms_start = time.perf_counter_ns()
steps = 0
for _epoch in range(6):
    history.on_epoch_begin()
    for _ in range(3000):
        weights = weights * 0.9999 + 1e-5
        steps += 1
    time.sleep(0.01 * (_epoch + 1))  # epochs of other lengths, as a real log's are
    history.on_epoch_end(float((weights**2).mean()))
phase_end = time.perf_counter()
metrics = {
    "warmup": phase_end - phase_start,
    "speed": steps / (phase_end - phase_start),
    "took": round((time.perf_counter_ns() - ms_start) / 1e6, 3),
    "final_loss": history.rows[-1]["train_loss"],
}
layer = Layer()
config = {
    "layers": [{"class_name": "Dense", "shared_object_id": id(layer), "units": 16}],
    "study_name": "no-name-" + str(uuid.uuid4()),
    "session": secrets.token_urlsafe(16),
    "nonce": secrets.randbits(64),
    "trace": f"trace-{secrets.token_hex(8)}",
}
if control == "seeded-id":  # an id a seeded generator computed: it was never drawn from the OS
    seeded = random.Random(int.from_bytes(os.urandom(8), "little"))
    config["run_uuid"] = str(uuid.UUID(int=seeded.getrandbits(128), version=4))
(out / "history.json").write_text(json.dumps(history.rows))
with (out / "train.log").open("w") as log:  # the same durations, as a log line shows them
    for row in history.rows:
        log.write(f"epoch {row['epoch']} took {row['dur']:.5f}s train_loss {row['train_loss']:.6f}\n")
(out / "metrics.json").write_text(json.dumps(metrics))
(out / "config.json").write_text(json.dumps(config))
np.save(out / "model.npy", weights)
