"""Calls ops with no deterministic CPU implementation; `reprobox audit` must point at these lines."""

import torch
import torch.nn.functional as F

values = torch.zeros(8)
index = torch.tensor([1, 3, 5])
for _ in range(3):
    values.put_(index, torch.ones(3))  # audit: put_
pooled, where = F.max_pool1d(torch.arange(8.0).reshape(1, 1, 8), 2, return_indices=True)
restored = F.max_unpool1d(pooled, where, 2)  # audit: max_unpool
print(values.sum().item(), restored.sum().item())
