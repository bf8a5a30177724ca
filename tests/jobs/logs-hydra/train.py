"""A few SGD steps configured by Hydra the way its quickstart does: @hydra.main, a config folder, a log.

Hydra runs it in outputs/<date>/<time>/ with .hydra/ (the composed config) and train.log beside what the
job saves there.
"""

import logging
import os
from pathlib import Path

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

log = logging.getLogger(__name__)


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    x, y = torch.randn(32, 4), torch.randn(32, 1)
    noise_at = int(os.environ.get("NOISE_AT_STEP", "-1"))
    for step in range(cfg.steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        logged = loss.item()
        if step == noise_at:  # entropy no seed controls
            logged += (1 + int.from_bytes(os.urandom(2), "little")) * 1e-3
        log.info("step %d loss %.6f", step, logged)
    torch.save(model.state_dict(), Path(HydraConfig.get().runtime.output_dir) / "model.pt")


if __name__ == "__main__":
    main()
