"""A few NumPy gradient steps tracked with MLflow as its quickstart does: a run, a param, a metric a step."""

import os
from pathlib import Path

import mlflow
import numpy as np

rng = np.random.default_rng(0)
weight, bias = rng.standard_normal((4, 1)), np.zeros(1)
x, y = rng.standard_normal((32, 4)), rng.standard_normal((32, 1))
noise_at = int(os.environ.get("NOISE_AT_STEP", "-1"))

mlflow.set_tracking_uri((Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "mlruns").as_uri())
with mlflow.start_run():
    mlflow.log_param("lr", 0.1)
    for step in range(5):
        residual = x @ weight + bias - y
        logged = float(np.mean(residual**2))
        weight -= 0.1 * x.T @ (2 * residual / len(x))
        bias -= 0.1 * (2 * residual / len(x)).sum(axis=0)
        if step == noise_at:  # entropy no seed controls
            logged += (1 + int.from_bytes(os.urandom(2), "little")) * 1e-3
        mlflow.log_metric("loss", logged, step=step)
