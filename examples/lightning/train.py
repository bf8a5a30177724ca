"""A small regression model trained with Lightning, the way its docs do it, and nothing seeded here.

`random_split` of a synthetic data set, DataLoaders with two persistent workers and shuffling, a
`ModelCheckpoint` keeping the two best epochs by validation loss, and a `CSVLogger`: every source of
run-to-run variation a Lightning job usually has. Checkpoints and metrics land under $REPROBOX_OUTPUT_DIR.
"""

from __future__ import annotations

import os

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split


class Regressor(L.LightningModule):
    def __init__(self, features: int = 16, hidden: int = 32, lr: float = 1e-2) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(features, hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main() -> None:
    x = torch.randn(512, 16)
    y = x @ torch.randn(16) + 0.1 * torch.randn(512)
    train, val = random_split(TensorDataset(x, y), [448, 64])
    loaders = {"num_workers": 2, "persistent_workers": True, "batch_size": 32}
    output_dir = os.environ["REPROBOX_OUTPUT_DIR"]
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        default_root_dir=output_dir,
        logger=CSVLogger(output_dir, name="logs"),
        callbacks=[ModelCheckpoint(monitor="val_loss", save_top_k=2)],
        log_every_n_steps=5,
        enable_progress_bar=False,
    )
    trainer.fit(
        Regressor(),
        DataLoader(train, shuffle=True, **loaders),
        DataLoader(val, **loaders),
    )


if __name__ == "__main__":
    main()
