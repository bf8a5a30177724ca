"""Train a small classifier with DistributedDataParallel, one process per rank under torchrun.

Nothing here is seeded. Rank 0 draws the synthetic data set and broadcasts it, so every rank holds the
same data; a shuffling DistributedSampler gives each rank its shard; DDP averages gradients across ranks
(an all-reduce: gloo on CPU, NCCL on GPUs); dropout draws from each rank's own generator. Rank 0 saves
the checkpoint to $REPROBOX_OUTPUT_DIR.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FEATURES = 16
CLASSES = 4


def shared_dataset(samples: int, device: torch.device) -> TensorDataset:
    """Rank 0's random data, broadcast to every rank (the other ranks' draws would differ)."""
    points = torch.empty(samples, FEATURES, device=device)
    labels = torch.empty(samples, dtype=torch.long, device=device)
    if dist.get_rank() == 0:
        centres = torch.randn(CLASSES, FEATURES, device=device)
        labels.copy_(torch.randint(0, CLASSES, (samples,), device=device))
        points.copy_(centres[labels] + 0.5 * torch.randn(samples, FEATURES, device=device))
    dist.broadcast(points, src=0)
    dist.broadcast(labels, src=0)
    return TensorDataset(points.cpu(), labels.cpu())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=1024)
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)

    data = shared_dataset(args.samples, device)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, CLASSES))
    ddp = DistributedDataParallel(model.to(device), device_ids=[device.index] if cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros((), device=device)
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = loss_fn(ddp(inputs.to(device)), targets.to(device))
            loss.backward()
            optimizer.step()
            total += loss.detach()
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch + 1}: mean loss {total.item() / (world * len(loader)):.4f}", flush=True)

    if rank == 0:
        output_dir = Path(os.environ.get("REPROBOX_OUTPUT_DIR", "out"))
        output_dir.mkdir(parents=True, exist_ok=True)
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "world_size": world}
        torch.save(state, output_dir / "model.pt")
        print(f"saved {output_dir / 'model.pt'} (world size {world})", flush=True)
    # Teardown in an order that cannot deadlock: while this thread frees the process group (the DDP
    # reducer holds its last reference) it joins gloo's worker threads holding the GIL, so no worker may
    # be the one to free a collective's tensors then (that needs the GIL). Keeping the last collective's
    # handle until after the group is gone makes this thread free them.
    finished = dist.barrier(async_op=True)
    finished.wait()
    dist.destroy_process_group()
    del ddp
    del finished


if __name__ == "__main__":
    main()
