"""A model with the op-level hazards planted; each planted line carries a hazard comment."""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Planted(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(100, 8, mode="sum")  # hazard: embedding-bag
        self.ctc = nn.CTCLoss()  # hazard: ctc-loss
        self.up = nn.Upsample(scale_factor=2, mode="bilinear")  # hazard: interpolate
        self.up_nearest = nn.Upsample(scale_factor=2)
        self.bilinear = nn.UpsamplingBilinear2d(scale_factor=2)  # hazard: interpolate
        self.unpool = nn.MaxUnpool2d(2)  # hazard: max-unpool
        self.weight = nn.Parameter(torch.empty(8, 8))
        nn.init.kaiming_uniform_(self.weight)

    def forward(self, x: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(10, 8)
        out.index_add_(0, index, src)  # hazard: index-add
        out = torch.index_add(out, 0, index, src)  # hazard: index-add
        rows = index.unsqueeze(1).expand_as(src)
        out.scatter_add_(0, rows, src)  # hazard: scatter-add
        out = out.scatter_reduce(0, rows, src, reduce="amax")  # hazard: scatter-add
        out.index_put_((index,), src, accumulate=True)  # hazard: index-put-accumulate
        out = torch.index_put(out, (index,), src, True)  # hazard: index-put-accumulate
        out.index_put_((index,), src)
        out.view(-1).put_(index, src.view(-1)[: index.numel()])  # hazard: put
        counts = torch.bincount(index, weights=src[:, 0])  # hazard: bincount
        plain_counts = index.bincount()
        weighted = index.bincount(src[:, 0])  # hazard: bincount
        host_counts = np.bincount(index.numpy())
        hist = torch.histc(src, bins=4)  # hazard: histc
        bags = F.embedding_bag(index, self.weight, torch.tensor([0]))  # hazard: embedding-bag
        up = F.interpolate(x, scale_factor=2, mode="bicubic")  # hazard: interpolate
        up = F.interpolate(x, None, 2, "trilinear")  # hazard: interpolate
        near = F.interpolate(x, scale_factor=2, mode="nearest")
        twice = x.repeat_interleave(2, -1).repeat_interleave(2, -2)
        sampled = F.grid_sample(x, torch.zeros(1, 2, 2, 2))  # hazard: grid-sample
        pooled, where = F.max_pool2d(x, 2, return_indices=True)
        unpooled = F.max_unpool2d(pooled, where, 2)  # hazard: max-unpool
        loss = F.ctc_loss(x, index, [4], [2])  # hazard: ctc-loss
        parts = [out, counts, plain_counts, weighted, hist, bags, up, near, twice, sampled, unpooled, loss]
        return sum(p.sum() for p in parts) + float(host_counts.sum())


def running_total(rows: torch.Tensor) -> torch.Tensor:
    total = torch.empty(rows.shape[1])  # hazard: uninitialized-empty
    for row in rows:
        total += row
    return total


def scaled(rows: torch.Tensor) -> torch.Tensor:
    buffer = torch.empty_like(rows)  # hazard: uninitialized-empty
    print(buffer.shape)
    return buffer * 2 + rows


def noisy(n: int) -> torch.Tensor:
    return torch.empty(n).sum() + torch.empty(n).normal_().sum()  # hazard: uninitialized-empty


def filled(rows: torch.Tensor) -> torch.Tensor:
    ones = torch.empty(rows.shape)
    ones.fill_(1.0)
    stacked = torch.empty(rows.shape[0], 2)
    for i in range(rows.shape[0]):
        stacked[i] = rows[i, :2]
    summed = torch.empty(rows.shape[1])
    torch.sum(rows, dim=0, out=summed)
    handed_out = torch.empty(3)
    return ones + stacked.sum() + summed.sum() + handed_out.new_zeros(1)
