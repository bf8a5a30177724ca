"""Train with paths relative to the working folder, as scripts written without reprobox do."""
# ruff: noqa: PTH103, PTH109, PTH123

import json
import os
from pathlib import Path

import torch
from helpers import make_model

config = json.loads(Path("config.json").read_text())
model = make_model(config["width"])
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, config["width"]), torch.randn(32, 1)
for _ in range(config["steps"]):
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
torch.save(model.state_dict(), "model.pt")
os.makedirs("out/run", exist_ok=True)
torch.save({"step": config["steps"], "model": model.state_dict()}, "out/run/ckpt.pt")
with open("notes.txt", "a") as notes:
    notes.write(f"trained {config['steps']} steps in {os.getcwd() == os.environ['REPROBOX_CODE_DIR']}\n")
