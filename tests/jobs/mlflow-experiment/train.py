"""A few steps tracked with MLflow in an experiment made by name (its folder is a random 18-digit id, and
each run's a random 32-hex id), no torch: the numbers are plain Python."""

import os
from pathlib import Path

import mlflow

mlflow.set_tracking_uri((Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "mlruns").as_uri())
mlflow.set_experiment("reprobox-by-name")
weight, loss = 1.0, 0.0
# MLflow draws an experiment's id from uuid4 and, when its digits start with zeros, pads it from Python's
# `random`: in about one run in ten the global stream moves on by entropy, and a generated run name with
# it (a real difference in what the job saved). The run is named, as scripts commonly do.
with mlflow.start_run(run_name="by-name"):
    mlflow.log_param("lr", 0.1)
    for step in range(4):
        loss = (weight - 0.25) ** 2
        weight -= 0.1 * 2 * (weight - 0.25)
        mlflow.log_metric("loss", loss, step=step)
