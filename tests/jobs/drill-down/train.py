"""A small model trained deterministically except for one planted source of difference (PLANT).

PLANT=forward-op   a custom operator in each block's mlp (blocks.0.mlp first) adds noise from os.urandom
PLANT=backward     a custom autograd Function's backward (in blocks.0.mlp) adds noise from os.urandom
PLANT=data-order   the DataLoader shuffles with a generator seeded from os.urandom from epoch 2 on
PLANT=rng          the global generator is reseeded from os.urandom: blocks.0.drop draws another mask
PLANT=none         nothing: two runs are bit-identical

The plant acts from optimizer step PLANT_STEP on (data-order: the epoch that step starts);
WORKERS sets the DataLoader's worker processes; LOADER=plain indexes the data by hand instead.
"""

import os
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

PLANT = os.environ.get("PLANT", "none")
PLANT_STEP = int(os.environ.get("PLANT_STEP", "5"))
STEPS = int(os.environ.get("STEPS", "8"))
WORKERS = int(os.environ.get("WORKERS", "0"))
LOADER = os.environ.get("LOADER", "dataloader")
BATCH = 16
step = 0


def entropy() -> float:
    return (int.from_bytes(os.urandom(2), "little") + 1) * 1e-7


@torch.library.custom_op("drilldown_test::jitter", mutates_args=())
def jitter(x: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    if PLANT == "forward-op" and step >= PLANT_STEP:
        out[0, 0] += entropy()  # a kernel that is not deterministic
    return out


@jitter.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


jitter.register_autograd(lambda ctx, grad: grad)


class NoisyGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x * 1.0

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        if PLANT == "backward" and step >= PLANT_STEP:
            grad = grad + entropy()
        return grad


class Mlp(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = NoisyGrad.apply(torch.relu(self.fc1(x)))
        return jitter(self.fc2(h))


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = Mlp(width)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.drop(self.mlp(self.norm(x)))


class Net(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.embed = nn.Linear(8, width)
        self.blocks = nn.ModuleList([Block(width) for _ in range(2)])
        self.head = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def batches(data: TensorDataset, generator: torch.Generator):
    if LOADER == "plain":
        order = torch.randperm(len(data), generator=generator)
        features, labels = data.tensors
        return [(features[i], labels[i]) for i in order.split(BATCH)]
    return DataLoader(data, batch_size=BATCH, shuffle=True, generator=generator, num_workers=WORKERS)


def main() -> None:
    global step  # noqa: PLW0603 - the plants read the step the training is at
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    per_epoch = len(data) // BATCH
    while step < STEPS:
        epoch_starts = step + 1
        generator = torch.Generator().manual_seed(epoch_starts)
        if PLANT == "data-order" and epoch_starts >= PLANT_STEP:
            generator.manual_seed(int.from_bytes(os.urandom(4), "little"))
        loader = batches(data, generator)
        for inputs, targets in loader:
            if PLANT == "rng" and step + 1 == PLANT_STEP:
                torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
            loss = nn.functional.cross_entropy(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step >= STEPS:
                break
        assert per_epoch > 0
    torch.save(model.state_dict(), Path(os.environ.get("REPROBOX_OUTPUT_DIR", ".")) / "model.pt")


if __name__ == "__main__":
    main()
