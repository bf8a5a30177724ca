"""A few SGD steps logged to W&B the way its quickstart does, in offline mode."""

import os

import torch
import wandb

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
noise_at = int(os.environ.get("NOISE_AT_STEP", "-1"))

run = wandb.init(project="reprobox-logs", config={"lr": 0.1}, dir=os.environ["REPROBOX_OUTPUT_DIR"])
for step in range(5):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    logged = loss.item()
    if step == noise_at:  # entropy no seed controls
        logged += (1 + int.from_bytes(os.urandom(2), "little")) * 1e-3
    run.log({"loss": logged})
run.finish()
