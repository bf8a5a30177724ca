"""A training script with the run-level hazards planted; each planted line carries a hazard comment."""

import argparse
import random
import time

import numpy as np
import torch
import torch as th
import torch.backends.cudnn as cudnn
from torch.utils.data import DataLoader as DL
from torch.utils.data import TensorDataset, random_split

SEED = int(time.time())  # hazard: seed-from-clock


def build_loaders(workers: int, **options: object) -> list[DL]:
    data = TensorDataset(torch.arange(64.0).reshape(32, 2), torch.arange(32))
    g = torch.Generator()
    g.manual_seed(0)
    return [
        DL(data, batch_size=4, shuffle=True, num_workers=2),  # hazard: dataloader-unseeded-workers
        DL(data, batch_size=4, num_workers=workers, generator=g),  # hazard: dataloader-unseeded-workers
        th.utils.data.DataLoader(data, 4, True, None, None, 2),  # hazard: dataloader-unseeded-workers
        DL(data, batch_size=4, shuffle=True),  # no workers: the main process draws from the seeded RNG
        DL(data, batch_size=4, num_workers=0),
        DL(data, batch_size=4, num_workers=2, generator=g, worker_init_fn=print),
        DL(data, **options),  # hazard: dataloader-unchecked
        DL(data, num_workers=workers, generator=g, worker_init_fn=print, **options),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    random.seed(time.time())  # hazard: seed-from-clock
    torch.manual_seed(time.time_ns() % 2**32)  # hazard: seed-from-clock
    np.random.seed()  # hazard: unseeded-generator
    torch.seed()  # hazard: unseeded-generator
    cudnn.benchmark = True  # set back to False below: the later assignment wins
    th.backends.cudnn.deterministic = False  # hazard: cudnn-deterministic-off
    cudnn.benchmark = False
    torch.use_deterministic_algorithms(False)  # hazard: deterministic-algorithms-off
    torch.use_deterministic_algorithms(True, warn_only=True)
    model = torch.nn.Linear(2, 1)
    fast = torch.compile(model, mode="max-autotune")  # hazard: compile-autotune
    plain = torch.compile(model)  # hazard: compile
    tuned = torch.compile(model, options={"max_autotune": True})  # hazard: compile-autotune
    torch._inductor.config.coordinate_descent_tuning = True  # hazard: compile-autotune
    cudnn.benchmark = args.workers > 4  # hazard: cudnn-benchmark
    samples = TensorDataset(torch.arange(8.0))
    train, held_out = th.utils.data.random_split(samples, [6, 2])  # hazard: random-split-unseeded
    kept = random_split(train, [0.5, 0.5], generator=torch.Generator().manual_seed(0))
    for loader in build_loaders(args.workers):
        for x, _ in loader:
            print(fast(x).sum() + plain(x).sum() + tuned(x).sum(), SEED, held_out, kept)


@torch.compile  # hazard: compile
def step(x: torch.Tensor) -> torch.Tensor:
    return x * 2


if __name__ == "__main__":
    main()
