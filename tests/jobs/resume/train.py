"""examples/long-run's training with knobs that plant the faults spot-checks and resume checks must catch.

FORGET names state the checkpoint leaves out (torch-rng, numpy-rng, python-rng, optimizer, scheduler,
loader, position), or stop-checkpoint: --max-steps stops without saving unless on a save step, or
max-steps: --max-steps is ignored. --accumulate N makes every N micro-batches one optimizer step, with
steps and checkpoints counted in micro-batches (as scripts with gradient accumulation often count).
What follows is the example's own description:

A long training job that can be stopped and resumed exactly, the way a preemptible job should be.

Every --save-every optimizer steps it saves `ckpt/step-N.pt` under $REPROBOX_OUTPUT_DIR with everything
the next step depends on: the model, the optimizer and the LR scheduler, the torch, NumPy and Python RNG
states (dropout, augmentation), and the data position (the loader generator's state at the start of the
epoch and how many batches of it were used). `--resume PATH` starts from such a checkpoint; `--max-steps K`
stops after step K (saving there) without changing the schedule, which is computed from --steps.
"""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps of the whole training")
    parser.add_argument("--save-every", type=int, default=10)
    parser.add_argument("--width", type=int, default=64, help="hidden units (the cost of a step)")
    parser.add_argument("--resume", type=Path, help="a checkpoint to continue from")
    parser.add_argument("--max-steps", type=int, help="stop after this step (saving a checkpoint there)")
    parser.add_argument("--accumulate", type=int, default=1, help="micro-batches per optimizer step")
    return parser.parse_args()


def data() -> TensorDataset:
    g = torch.Generator().manual_seed(1234)  # the data set itself is fixed
    x = torch.randn(1024, 32, generator=g)
    return TensorDataset(x, x @ torch.randn(32, generator=g) + 0.1 * torch.randn(1024, generator=g))


def noisy(x: torch.Tensor) -> torch.Tensor:
    """Augmentation that draws from NumPy and Python's random, as real pipelines do."""
    scale = 1.0 + 0.01 * float(np.random.randn()) + 0.01 * random.random()
    return x * scale


def save(
    path: Path,
    step: int,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    loader_state: torch.Tensor,
    used: int,
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    numpy_state = np.random.get_state()
    torch.save(
        {
            "step": step,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": {
                "torch": torch.get_rng_state(),
                "numpy": [torch.from_numpy(numpy_state[1].astype(np.int64)), *map(float, numpy_state[2:])],
                "python": random.getstate(),
            },
            "data": {"epoch_start_state": loader_state, "batches_used": used},
        },
        path,
    )


FORGET = set(filter(None, os.environ.get("FORGET", "").split(",")))


def main() -> None:
    args = arguments()
    out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
    model = nn.Sequential(nn.Linear(32, args.width), nn.ReLU(), nn.Dropout(0.1), nn.Linear(args.width, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=3e-3, total_steps=args.steps // args.accumulate
    )
    generator = torch.Generator().manual_seed(7)
    loader = DataLoader(data(), batch_size=32, shuffle=True, generator=generator)
    step, skip = 0, 0
    if args.resume:
        state = torch.load(args.resume, weights_only=True)
        model.load_state_dict(state["model"])
        if "optimizer" not in FORGET:
            optimizer.load_state_dict(state["optimizer"])
        if "scheduler" not in FORGET:
            scheduler.load_state_dict(state["scheduler"])
        if "torch-rng" not in FORGET:
            torch.set_rng_state(state["rng"]["torch"])
        key, pos, has_gauss, cached = state["rng"]["numpy"]
        if "numpy-rng" not in FORGET:
            np.random.set_state(("MT19937", key.numpy().astype(np.uint32), int(pos), int(has_gauss), cached))
        if "python-rng" not in FORGET:
            random.setstate(state["rng"]["python"])
        if "loader" not in FORGET:
            generator.set_state(state["data"]["epoch_start_state"])
        step, skip = state["step"], state["data"]["batches_used"]
        if "position" in FORGET:
            skip = 0
    stop = args.steps if "max-steps" in FORGET else (args.max_steps or args.steps)
    while step < stop:
        epoch_start = generator.get_state()
        for used, (x, y) in enumerate(loader, start=1):
            if skip:
                skip -= 1
                continue
            loss = nn.functional.mse_loss(model(noisy(x)).squeeze(-1), y) / args.accumulate
            loss.backward()
            step += 1
            if step % args.accumulate == 0:
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if step % args.save_every == 0 or (step == stop and "stop-checkpoint" not in FORGET):
                save(
                    out / "ckpt" / f"step-{step}.pt",
                    step,
                    model=model,
                    optimizer=optimizer,
                    scheduler=scheduler,
                    loader_state=epoch_start,
                    used=used,
                )
            if step == stop:
                break
    if step == args.steps:
        torch.save(model.state_dict(), out / "model.pt")
        print(f"trained {step} steps")


if __name__ == "__main__":
    main()
