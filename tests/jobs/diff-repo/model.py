"""A model whose forward sums three projections: the order of that sum is what a diff can change."""

from __future__ import annotations

import torch
from torch import nn


class Mixer(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.left = nn.Linear(width, width)
        self.middle = nn.Linear(width, width)
        self.right = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        left = self.left(x)
        middle = self.middle(x)
        right = self.right(x)
        return (left + middle) + right


class Net(nn.Module):
    def __init__(self, features: int, width: int, classes: int) -> None:
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.mixer = Mixer(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.mixer(torch.relu(self.inp(x)))))
