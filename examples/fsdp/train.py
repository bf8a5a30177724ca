"""Train a small MLP with FSDP2 (``torch.distributed.fsdp.fully_shard``), one process per rank under
torchrun, and save it with torch.distributed.checkpoint (DCP) as torch's DCP tutorial does.

Nothing here is seeded. Rank 0 draws the synthetic data set, the initial weights and each epoch's order
of the samples, and broadcasts them, so every rank starts from the same model and sees the same order.
``fully_shard`` keeps each rank's slice of every parameter (and of AdamW's state); backward
reduce-scatters the gradients (gloo on CPU, NCCL on GPUs). The checkpoint is a DCP folder under
$REPROBOX_OUTPUT_DIR: ``.metadata`` and one ``__<rank>_0.distcp`` shard per rank, each holding that rank's
slices of the model's and the optimizer's tensors.

Each optimizer step takes a fixed global batch of MICRO_BATCHES micro-batches of MICRO_BATCH samples, and
each rank trains on its share of them (rank r on micro-batches r, r + world, ...), its loss scaled by
world / MICRO_BATCHES. On two ranks FSDP averages the two micro-batches' gradients; on one rank, the two
scaled gradients add up to the same numbers, bit for bit (scaling by a power of two is exact, and a sum of
two is the same sum in either order). So the trained tensors do not depend on how many ranks hold them:
run on one rank, the job saves the same tensors, cut into one shard instead of two.
"""

from __future__ import annotations

import argparse
import gc
import os
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.fsdp import fully_shard

FEATURES = 16
HIDDEN = 32
CLASSES = 4
MICRO_BATCH = 32
MICRO_BATCHES = 2  # per optimizer step, over all ranks: a world size must divide it


class AppState(Stateful):
    """The model and optimizer as DCP saves them (the tutorial's wrapper): ``get_state_dict`` names every
    tensor by its fully qualified name and keeps each one sharded as FSDP holds it."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.model, self.optimizer = model, optimizer

    def state_dict(self) -> dict[str, Any]:
        model_state, optimizer_state = get_state_dict(self.model, self.optimizer)
        return {"model": model_state, "optim": optimizer_state}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state_dict["model"],
            optim_state_dict=state_dict["optim"],
        )


def from_rank_zero(tensor: torch.Tensor, draw: Any) -> torch.Tensor:
    """``draw()`` on rank 0, broadcast into ``tensor`` on every rank (the other ranks' draws would differ)."""
    if dist.get_rank() == 0:
        tensor.copy_(draw())
    dist.broadcast(tensor, src=0)
    return tensor


def shared_dataset(samples: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    labels = from_rank_zero(
        torch.empty(samples, dtype=torch.long, device=device),
        lambda: torch.randint(0, CLASSES, (samples,), device=device),
    )
    centres = from_rank_zero(
        torch.empty(CLASSES, FEATURES, device=device), lambda: torch.randn(CLASSES, FEATURES, device=device)
    )
    noise = from_rank_zero(
        torch.empty(samples, FEATURES, device=device), lambda: torch.randn(samples, FEATURES, device=device)
    )
    return centres[labels] + 0.5 * noise, labels


def sharded_model(device: torch.device) -> nn.Module:
    """The MLP with rank 0's initial weights on every rank, each layer and then the whole sharded."""
    model = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, CLASSES),
    ).to(device)
    for tensor in model.state_dict().values():
        dist.broadcast(tensor, src=0)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    return model


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--samples", type=int, default=256)
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if MICRO_BATCHES % world:
        raise SystemExit(
            f"a world size of {world} does not divide the {MICRO_BATCHES} micro-batches of a step"
        )
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)

    points, labels = shared_dataset(args.samples, device)
    model = sharded_model(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    global_batch = MICRO_BATCH * MICRO_BATCHES
    steps_per_epoch = args.samples // global_batch

    for step in range(args.steps):
        if step % steps_per_epoch == 0:
            order = from_rank_zero(
                torch.empty(args.samples, dtype=torch.long, device=device),
                lambda: torch.randperm(args.samples, device=device),
            )
        start = (step % steps_per_epoch) * global_batch
        batch = order[start : start + global_batch].view(MICRO_BATCHES, MICRO_BATCH)
        total = torch.zeros((), device=device)
        for micro in range(rank, MICRO_BATCHES, world):
            chosen = batch[micro]
            loss = loss_fn(model(points[chosen]), labels[chosen])
            (loss * (world / MICRO_BATCHES)).backward()
            total += loss.detach()
        optimizer.step()
        optimizer.zero_grad()
        dist.all_reduce(total)
        if rank == 0:
            print(f"step {step + 1}: mean loss {total.item() / MICRO_BATCHES:.4f}", flush=True)

    checkpoint = Path(os.environ.get("REPROBOX_OUTPUT_DIR", "out")) / "checkpoint"
    dcp.save({"app": AppState(model, optimizer)}, checkpoint_id=checkpoint)
    if rank == 0:
        print(f"saved {checkpoint} (world size {world}, one shard per rank)", flush=True)
    # Teardown while the interpreter is whole, in an order that cannot deadlock: FSDP's modules and their
    # sharded tensors are freed now rather than at exit; then, while this thread frees the process group it
    # joins gloo's worker threads holding the GIL, so no worker may be the one to free a collective's
    # tensors then (that needs the GIL): keeping the last collective's handle until after the group is
    # gone makes this thread free them.
    del model, optimizer
    gc.collect()
    finished = dist.barrier(async_op=True)
    finished.wait()
    dist.destroy_process_group()
    del finished


if __name__ == "__main__":
    main()
