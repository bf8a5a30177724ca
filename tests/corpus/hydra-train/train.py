# Hydra's basic tutorial (https://hydra.cc/docs/tutorials/basic/your_first_app/config_file/ and
# .../running_your_app/logging/, .../running_your_app/working_directory/): a @hydra.main app reading
# config.yaml beside it, logging through Python's logging as Hydra configures it (to the console and to
# train.log in Hydra's outputs/DATE/TIME folder, with .hydra/config.yaml, hydra.yaml and
# overrides.yaml), and saving its output in that folder (HydraConfig.get().runtime.output_dir). The
# application trains a small torch MLP on random data.
import logging
import os

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from torch import nn

# A logger for this file
log = logging.getLogger(__name__)


@hydra.main(version_base=None, config_path=".", config_name="config")
def my_app(cfg: DictConfig) -> None:
    print(OmegaConf.to_yaml(cfg))
    output_dir = HydraConfig.get().runtime.output_dir
    print(f"Output directory : {output_dir}")

    x = torch.randn(cfg.data.n, cfg.data.features)
    y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(cfg.data.n, 1)
    model = nn.Sequential(nn.Linear(cfg.data.features, cfg.model.hidden), nn.ReLU(), nn.Linear(cfg.model.hidden, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.optim.lr)
    for epoch in range(cfg.optim.epochs):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        log.info(f"epoch {epoch} loss {loss.item():.6f}")

    torch.save(model.state_dict(), os.path.join(output_dir, "model.pt"))


if __name__ == "__main__":
    my_app()
