"""A paper-style job in NumPy: train a logistic regression, report its validation accuracy in metrics.json.

The script seeds nothing: reprobox seeds NumPy's global generator with the job's seed, so
`verify --seeds N` gives N different draws of data and initial weights.
"""

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np

teacher = np.random.randn(8)
x = np.random.randn(640, 8)
y = (x @ teacher > 0).astype(np.float64)
train_x, train_y, val_x, val_y = x[:512], y[:512], x[512:], y[512:]

weight, bias = np.random.randn(8) * 0.1, np.zeros(1)
for _epoch in range(200):
    error = 1 / (1 + np.exp(-(train_x @ weight + bias))) - train_y
    weight -= 0.5 * train_x.T @ error / len(train_x)
    bias -= 0.5 * error.mean(keepdims=True)

predicted = 1 / (1 + np.exp(-(val_x @ weight + bias)))
val_acc = float(((predicted > 0.5) == (val_y == 1)).mean())
val_loss = float(-np.mean(val_y * np.log(predicted) + (1 - val_y) * np.log(1 - predicted)))

out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
with zipfile.ZipFile(out / "model.npz", "w") as archive:  # a fixed member date: the bytes are the weights'
    for name, array in {"weight": weight, "bias": bias}.items():
        member = io.BytesIO()
        np.save(member, array)
        archive.writestr(zipfile.ZipInfo(f"{name}.npy"), member.getvalue())
(out / "metrics.json").write_text(json.dumps({"val_acc": round(val_acc, 4), "val_loss": val_loss}))
print(f"after 200 epochs: val_acc={val_acc:.4f}")
