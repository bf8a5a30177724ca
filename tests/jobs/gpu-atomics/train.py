"""Pool a million feature rows into 4 learned bins with index_add_ (a scatter-sum, in 40 launches a
step), and fit the bins.

Every bin's sum is some 250,000 atomic adds on a GPU. The sums are kept near 1 and the steps large, so
that a different order of those adds (a difference in the last bit of a sum) reaches the weights and
the loss instead of rounding away; the last step's sums are saved too.
"""

import math
import os
from pathlib import Path

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
ROWS, BINS, WIDTH, LAUNCHES = 1_000_000, 4, 8, 40


class BinPooling(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weights = nn.Parameter(torch.randn(BINS, WIDTH))
        self.register_buffer("last_pooled", torch.zeros(BINS, WIDTH))

    def forward(self, features: torch.Tensor, bins_of_rows: torch.Tensor) -> torch.Tensor:
        contributions = features * self.weights[bins_of_rows]
        pooled = torch.zeros(BINS, WIDTH, device=features.device)
        for rows, bins in zip(contributions.chunk(LAUNCHES), bins_of_rows.chunk(LAUNCHES), strict=True):
            pooled.index_add_(0, bins, rows)
        pooled = pooled / math.sqrt(ROWS / BINS)
        self.last_pooled.copy_(pooled.detach())
        return pooled


model = BinPooling().to(device)
bins_of_rows = torch.randint(0, BINS, (ROWS,), device=device)
target = torch.randn(BINS, WIDTH, device=device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.25)

for step in range(5):
    features = torch.randn(ROWS, WIDTH, device=device)
    loss = (model(features, bins_of_rows) - target).pow(2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.9g} on {device}", flush=True)

torch.save(model.state_dict(), Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "model.pt")
