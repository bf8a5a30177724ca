"""A small LightningModule trained the way Lightning's docs do it: checkpoints every few steps and at the
end of every epoch, a per-step LR schedule sized from the Trainer's max_steps, shuffled data and dropout.
Nothing here knows about resuming or stopping; reprobox does both through the Trainer
(`resume: {framework: lightning}`).
"""

from __future__ import annotations

import os

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

BATCHES_PER_EPOCH, BATCH = 10, 4


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 1))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.mse_loss(self.net(x).squeeze(-1), y)

    def configure_optimizers(self) -> dict[str, object]:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)
        decay = torch.optim.lr_scheduler.LinearLR(
            optimizer, start_factor=1.0, end_factor=0.1, total_iters=self.trainer.max_steps
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": "step"}}


def main() -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(BATCHES_PER_EPOCH * BATCH, 8, generator=generator)
    y = x.sum(dim=1)
    output_dir = os.environ["REPROBOX_OUTPUT_DIR"]
    trainer = L.Trainer(
        max_steps=14,  # into a second epoch
        accelerator="cpu",
        default_root_dir=output_dir,
        logger=False,
        callbacks=[  # every 4 steps, and at the end of every epoch
            ModelCheckpoint(dirpath=f"{output_dir}/ckpt", every_n_train_steps=4, save_top_k=-1),
            ModelCheckpoint(dirpath=f"{output_dir}/ckpt", save_top_k=-1),
        ],
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = Regressor()
    trainer.fit(model, DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=True, num_workers=0))
    torch.save(model.state_dict(), f"{output_dir}/final.pt")


if __name__ == "__main__":
    main()
