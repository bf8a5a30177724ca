"""A tiny seeded regression whose metrics record the data snapshot's date in UTC."""

import io
import json
import os
import time
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


rng = np.random.default_rng(0)
weight, bias = rng.standard_normal((4, 1)), np.zeros(1)
x, y = rng.standard_normal((8, 4)), rng.standard_normal((8, 1))
for _step in range(3):
    error = 2 * (x @ weight + bias - y) / len(x)
    weight -= 0.1 * x.T @ error
    bias -= 0.1 * error.sum(axis=0)

out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
save_npz(out / "model.npz", weight=weight, bias=bias)
snapshot = time.strftime("%Y-%m-%d %H:%M", time.gmtime(1_700_000_000))
(out / "metrics.json").write_text(json.dumps({"snapshot": snapshot}))
