"""A script that saves what names its own run: a run name stamped from the local clock in a layout of its
own (nanoGPT-derived scripts save their whole config), Unix times in ns and as text, a repr carrying a
memory address, a log whose lines carry its pid and host, and a pickle holding datetime objects read from
the clock (Hyperopt's Trials keep their stamps so); its model is a NumPy array."""

import json
import os
import pickle
import socket
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

out = Path(os.environ["REPROBOX_OUTPUT_DIR"])


class Schedule:
    pass


config = {
    "wandb_run_name": "run" + datetime.now().strftime("%Y_%m_%d_%H_%M_%S"),  # local time, TZ in force
    "started_ns": time.time_ns(),
    "stamp": f"{time.time():.3f}",
    "schedule": repr(Schedule()),  # <__main__.Schedule object at 0x7f...>
    "lr": 0.1,
}
state = {"book_time": datetime.now(), "refresh_time": datetime.now(timezone.utc), "lr": 0.1}
if os.environ.get("OLD_STAMP") == "1":  # stamp-shaped, but no reading of this run's clock
    # some hours apart in each run (runs started in the same second would otherwise write the same one)
    hours = int.from_bytes(os.urandom(2), "little") % 10_000 / 3600
    config["release"] = (datetime.now() - timedelta(days=400, hours=hours)).strftime("%Y%m%d-%H%M%S")
    state["released"] = datetime.now(timezone.utc) - timedelta(days=400, hours=hours)
weights = np.random.default_rng(0).standard_normal((3, 3))
np.save(out / "model.npy", weights)
(out / "config.json").write_text(json.dumps(config))
(out / "state.pkl").write_bytes(pickle.dumps(state))
with (out / "train.log").open("w") as log:
    log.write(
        f"{datetime.now():%Y-%m-%d %H:%M:%S,%f} INFO MainThread:{os.getpid()} on {socket.gethostname()}\n"
    )
    log.write(f"step 1 loss {float(weights.sum()):.6f}\n")
