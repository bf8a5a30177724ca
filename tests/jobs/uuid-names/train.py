"""Seeded weights, equal every run, written to `<uuid4>.npz`: only the file name differs between runs."""

import io
import os
import uuid
import zipfile
from pathlib import Path

import numpy as np

rng = np.random.default_rng(0)
weights = {"weight": rng.standard_normal((2, 4)), "bias": rng.standard_normal(2)}
path = Path(os.environ["REPROBOX_OUTPUT_DIR"]) / f"{uuid.uuid4()}.npz"
with zipfile.ZipFile(path, "w") as archive:  # a fixed member date: the bytes are the weights'
    for name, array in weights.items():
        member = io.BytesIO()
        np.save(member, array)
        archive.writestr(zipfile.ZipInfo(f"{name}.npy"), member.getvalue())
