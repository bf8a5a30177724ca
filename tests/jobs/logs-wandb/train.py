"""A few NumPy gradient steps logged to W&B the way its quickstart does, in offline mode."""

import os

import numpy as np
import wandb

rng = np.random.default_rng(0)
weight, bias = rng.standard_normal((4, 1)), np.zeros(1)
x, y = rng.standard_normal((32, 4)), rng.standard_normal((32, 1))
noise_at = int(os.environ.get("NOISE_AT_STEP", "-1"))

run = wandb.init(project="reprobox-logs", config={"lr": 0.1}, dir=os.environ["REPROBOX_OUTPUT_DIR"])
for step in range(5):
    residual = x @ weight + bias - y
    logged = float(np.mean(residual**2))
    weight -= 0.1 * x.T @ (2 * residual / len(x))
    bias -= 0.1 * (2 * residual / len(x)).sum(axis=0)
    if step == noise_at:  # entropy no seed controls
        logged += (1 + int.from_bytes(os.urandom(2), "little")) * 1e-3
    run.log({"loss": logged})
run.finish()
