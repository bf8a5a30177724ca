"""A module the training script imports from its own folder."""

import torch


def make_model(width: int) -> torch.nn.Module:
    return torch.nn.Linear(width, 1)
