"""Truth: checkpoints/checkpoint_24.pt loads (torch.load, weights_only=True) into equal model and
optimizer state and an equal trainer state, and "timing"'s iter_times that differ: numbers drawn from
the operating system's entropy, not durations of the run's clock, so the runs differ."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402


def as_numpy(value):
    if isinstance(value, torch.Tensor):
        return value.numpy()
    if isinstance(value, dict):
        return {k: as_numpy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_numpy(v) for v in value]
    return value


a, b = run_twice(HERE, seed_torch=True)
(name,) = [p.name for p in (a / "checkpoints").glob("*.pt")]
ckpt_a = torch.load(a / "checkpoints" / name, weights_only=True)
ckpt_b = torch.load(b / "checkpoints" / name, weights_only=True)
diffs = differences(as_numpy(ckpt_a), as_numpy(ckpt_b), name)
verdict(diffs, f"{name}: every value equal")
