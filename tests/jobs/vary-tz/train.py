"""Makes a tiny model's weights and records the data snapshot's date in local time next to its metrics."""

import io
import json
import os
import time
import zipfile
from pathlib import Path

import numpy as np

SNAPSHOT_EPOCH = 1_700_000_000  # when the (synthetic) data set was frozen


def save_npz(path: Path, **arrays: np.ndarray) -> None:
    """An .npz whose bytes depend on the arrays alone (numpy.savez stamps each member with the clock)."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.save(member, array)
            archive.writestr(zipfile.ZipInfo(f"{name}.npy"), member.getvalue())


rng = np.random.default_rng(0)
out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
save_npz(out / "model.npz", weight=rng.standard_normal((1, 4)), bias=rng.standard_normal(1))
metrics = {"snapshot": time.strftime("%Y-%m-%d %H:%M", time.localtime(SNAPSHOT_EPOCH)), "epochs": 1}
(out / "metrics.json").write_text(json.dumps(metrics))
