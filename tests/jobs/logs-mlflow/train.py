"""A few SGD steps tracked with MLflow the way its quickstart does: a run, a param, a metric per step."""

import os
from pathlib import Path

import mlflow
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
noise_at = int(os.environ.get("NOISE_AT_STEP", "-1"))

mlflow.set_tracking_uri((Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "mlruns").as_uri())
with mlflow.start_run():
    mlflow.log_param("lr", 0.1)
    for step in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        logged = loss.item()
        if step == noise_at:  # entropy no seed controls
            logged += (1 + int.from_bytes(os.urandom(2), "little")) * 1e-3
        mlflow.log_metric("loss", logged, step=step)
