"""Tensor.put_ with accumulate=False has no deterministic implementation on any device, CPU included."""

import torch


def count_into(slots: int, index: torch.Tensor) -> torch.Tensor:
    counts = torch.zeros(slots)
    counts.put_(index, torch.ones(len(index)))  # raises under torch.use_deterministic_algorithms(True)
    return counts


print("counting", flush=True)
print(count_into(4, torch.tensor([0, 1, 1, 3])))
