"""Train with paths relative to the working folder, as scripts written without reprobox do."""
# ruff: noqa: PTH103, PTH109, PTH123

import io
import json
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
from helpers import make_model

config = json.loads(Path("config.json").read_text())
model = make_model(config["width"])
x, y = np.random.randn(32, config["width"]), np.random.randn(32, 1)
for _ in range(config["steps"]):
    error = 2 * (x @ model["weight"].T + model["bias"] - y) / len(x)
    model["weight"] -= 0.1 * error.T @ x
    model["bias"] -= 0.1 * error.sum(axis=0)
with zipfile.ZipFile("model.npz", "w") as archive:  # a fixed member date: the bytes are the weights'
    for name, array in model.items():
        member = io.BytesIO()
        np.save(member, array)
        archive.writestr(zipfile.ZipInfo(f"{name}.npy"), member.getvalue())
os.makedirs("out/run", exist_ok=True)
with open("out/run/ckpt.pkl", "wb") as ckpt:
    state = {"step": config["steps"], "model": {name: array.tolist() for name, array in model.items()}}
    pickle.dump(state, ckpt, protocol=4)
with open("notes.txt", "a") as notes:
    notes.write(f"trained {config['steps']} steps in {os.getcwd() == os.environ['REPROBOX_CODE_DIR']}\n")
