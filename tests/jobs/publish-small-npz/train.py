"""Train a small linear model for a few steps on random data (NumPy's global generator, which reprobox
seeds) and save its weights."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import numpy as np


def save_npz(path: Path, **arrays: np.ndarray) -> None:
    """An .npz whose bytes depend on the arrays alone (numpy.savez stamps each member with the clock)."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.save(member, array)
            archive.writestr(zipfile.ZipInfo(f"{name}.npy"), member.getvalue())


weight, bias = np.random.randn(16, 4) * 0.25, np.zeros(4)
for _step in range(5):
    inputs, targets = np.random.randn(32, 16), np.random.randn(32, 4)
    error = 2 * (inputs @ weight + bias - targets) / targets.size
    loss = float(np.mean((inputs @ weight + bias - targets) ** 2))
    weight -= 0.1 * inputs.T @ error
    bias -= 0.1 * error.sum(axis=0)
output = Path(os.environ.get("REPROBOX_OUTPUT_DIR", "out"))
output.mkdir(parents=True, exist_ok=True)
save_npz(output / "model.npz", weight=weight, bias=bias)
print(f"loss {loss:.4f}")
