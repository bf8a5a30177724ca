"""A few NumPy gradient steps configured by Hydra as its quickstart does: @hydra.main, a config folder, a log.

Hydra runs it in outputs/<date>/<time>/ with .hydra/ (the composed config) and train.log beside what the
job saves there.
"""

import io
import logging
import os
import zipfile
from pathlib import Path

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

log = logging.getLogger(__name__)


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    rng = np.random.default_rng(0)
    weight, bias = rng.standard_normal((4, 1)), np.zeros(1)
    x, y = rng.standard_normal((32, 4)), rng.standard_normal((32, 1))
    noise_at = int(os.environ.get("NOISE_AT_STEP", "-1"))
    for step in range(cfg.steps):
        residual = x @ weight + bias - y
        logged = float(np.mean(residual**2))
        weight -= cfg.lr * x.T @ (2 * residual / len(x))
        bias -= cfg.lr * (2 * residual / len(x)).sum(axis=0)
        if step == noise_at:  # entropy no seed controls
            logged += (1 + int.from_bytes(os.urandom(2), "little")) * 1e-3
        log.info("step %d loss %.6f", step, logged)
    member = io.BytesIO()
    np.save(member, weight)
    # a fixed member date (numpy.savez stamps the clock): the bytes are the weights'
    with zipfile.ZipFile(Path(HydraConfig.get().runtime.output_dir) / "model.npz", "w") as archive:
        archive.writestr(zipfile.ZipInfo("weight.npy"), member.getvalue())


if __name__ == "__main__":
    main()
