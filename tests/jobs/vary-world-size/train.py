"""A tiny regression trained under torchrun (gloo, CPU), in one of two ways.

`shard`: DistributedDataParallel over a DistributedSampler's shards with a fixed per-rank batch, as
most DDP scripts do. The global batch, the number of steps and the order gradients are summed in all
follow the world size, so the weights do too. Each rank also writes the samples it was given.

`gather`: the global batch is cut into a fixed number of chunks whatever the world size; rank r
computes the gradients of chunks r, r + world, ...; an all_gather (copies, no arithmetic) brings every
chunk's gradient to every rank, and each rank sums them in chunk order. The weights are the same bits
at any world size that divides the chunks.

Rank 0 saves the model. PLANT_RANK=R makes rank R add entropy to its predictions (`shard`), a
nondeterminism on one rank only.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

SAMPLES, FEATURES, CHUNKS, STEPS = 64, 8, 4, 3


def problem() -> tuple[nn.Linear, torch.Tensor, torch.Tensor]:
    """The same model and data on every rank (the script seeds itself; ranks are seeded apart)."""
    torch.manual_seed(0)
    model = nn.Linear(FEATURES, 1)
    x = torch.randn(SAMPLES, FEATURES)
    return model, x, x @ torch.randn(FEATURES, 1) + 0.1 * torch.randn(SAMPLES, 1)


def shard(model: nn.Linear, x: torch.Tensor, y: torch.Tensor, out: Path) -> None:
    rank = dist.get_rank()
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, shuffle=False)
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for xb, yb in DataLoader(data, batch_size=8, sampler=sampler):
        opt.zero_grad()
        prediction = ddp(xb)
        if str(rank) == os.environ.get("PLANT_RANK"):  # the drill-down's test: one rank adds entropy
            prediction = prediction + int.from_bytes(os.urandom(2), "little") * 1e-6
        nn.functional.mse_loss(prediction, yb).backward()
        opt.step()
    (out / f"rank-{rank}.json").write_text(json.dumps({"rank": rank, "samples": list(sampler)}))
    finished = dist.barrier(async_op=True)  # see examples/ddp: free the group before the reducer
    finished.wait()
    dist.destroy_process_group()
    del ddp, finished


def gather(model: nn.Linear, x: torch.Tensor, y: torch.Tensor) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    params = list(model.parameters())
    size = sum(p.numel() for p in params)
    for _step in range(STEPS):
        mine = torch.zeros(CHUNKS, size)
        for chunk in range(rank, CHUNKS, world):
            model.zero_grad()
            xc, yc = x.chunk(CHUNKS)[chunk], y.chunk(CHUNKS)[chunk]
            nn.functional.mse_loss(model(xc), yc).backward()
            mine[chunk] = torch.cat([p.grad.flatten() for p in params if p.grad is not None])
        everyone = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(everyone, mine)
        total = torch.zeros(size)
        for chunk in range(CHUNKS):  # fixed order, whoever computed the chunk
            total += everyone[chunk % world][chunk]
        with torch.no_grad():
            offset = 0
            for param in params:
                param.sub_(0.1 * (total[offset : offset + param.numel()] / CHUNKS).view_as(param))
                offset += param.numel()
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["shard", "gather"])
    args = parser.parse_args()
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
    model, x, y = problem()
    if args.mode == "gather":
        gather(model, x, y)
    else:
        shard(model, x, y, out)
    if rank == 0:
        torch.save(model.state_dict(), out / "model.pt")
        print(f"saved model.pt (world size {world})", flush=True)


if __name__ == "__main__":
    main()
