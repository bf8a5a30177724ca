"""A linear model trained by SGD with momentum in NumPy, resumable exactly from its checkpoints.

Every --save-every steps it saves `ckpt/step-N.npz` under $REPROBOX_OUTPUT_DIR with everything the next
step depends on: the weights, the momentum, NumPy's global RNG (the augmentation draws from it) and the
data position (the epoch and how many of its batches were used; each epoch's order follows from a fixed
seed and the epoch). `--resume PATH` starts from such a checkpoint; `--max-steps K` stops after step K
(saving there) without changing the schedule, which is computed from --steps.

FORGET=stop-checkpoint: --max-steps stops without saving unless on a save step. FORGET=max-steps:
--max-steps is ignored.
"""

from __future__ import annotations

import argparse
import io
import os
import zipfile
from pathlib import Path

import numpy as np

SAMPLES, FEATURES, BATCH = 256, 8, 32
FORGET = set(filter(None, os.environ.get("FORGET", "").split(",")))


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps of the whole training")
    parser.add_argument("--save-every", type=int, default=10)
    parser.add_argument("--resume", type=Path, help="a checkpoint to continue from")
    parser.add_argument("--max-steps", type=int, help="stop after this step (saving a checkpoint there)")
    return parser.parse_args()


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An .npz whose bytes depend on the arrays alone (numpy.savez stamps each member with the clock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.save(member, array)
            archive.writestr(zipfile.ZipInfo(f"{name}.npy"), member.getvalue())


def main() -> None:
    args = arguments()
    out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
    data = np.random.default_rng(1234)  # the data set itself is fixed
    x = data.standard_normal((SAMPLES, FEATURES))
    y = x @ data.standard_normal(FEATURES) + 0.1 * data.standard_normal(SAMPLES)
    weight, bias = np.zeros((1, FEATURES)), np.zeros(1)
    velocity_weight, velocity_bias = np.zeros_like(weight), np.zeros_like(bias)
    step, epoch, skip = 0, 0, 0
    if args.resume:
        with np.load(args.resume) as state:
            weight, bias = state["model.0.weight"], state["model.0.bias"]
            velocity_weight = state["optimizer.momentum.weight"]
            velocity_bias = state["optimizer.momentum.bias"]
            key, position = state["rng.numpy.key"], state["rng.numpy.position"]
            np.random.set_state(("MT19937", key, int(position[0]), int(position[1]), float(position[2])))
            step, epoch, skip = (int(v) for v in state["data.position"])
    stop = args.steps if "max-steps" in FORGET else (args.max_steps or args.steps)
    while step < stop:
        order = np.random.default_rng([7, epoch]).permutation(SAMPLES)
        for used, start in enumerate(range(0, SAMPLES, BATCH), start=1):
            if skip:
                skip -= 1
                continue
            rows = order[start : start + BATCH]
            inputs = x[rows] * (1.0 + 0.01 * np.random.standard_normal((len(rows), 1)))  # augmentation
            error = inputs @ weight[0] + bias[0] - y[rows]
            rate = 0.05 * (1.0 - step / args.steps)  # a schedule over the whole training
            velocity_weight = 0.9 * velocity_weight + (error @ inputs / len(rows))[None, :]
            velocity_bias = 0.9 * velocity_bias + error.mean()
            weight, bias = weight - rate * velocity_weight, bias - rate * velocity_bias
            step += 1
            if step % args.save_every == 0 or (step == stop and "stop-checkpoint" not in FORGET):
                _, key, position, has_gauss, cached = np.random.get_state()
                save_npz(
                    out / "ckpt" / f"step-{step}.npz",
                    {
                        "model.0.weight": weight,
                        "model.0.bias": bias,
                        "optimizer.momentum.weight": velocity_weight,
                        "optimizer.momentum.bias": velocity_bias,
                        "rng.numpy.key": key,
                        "rng.numpy.position": np.array([position, has_gauss, cached]),
                        "data.position": np.array([step, epoch, used]),
                    },
                )
            if step == stop:
                break
        else:
            epoch += 1
    if step == args.steps:
        save_npz(out / "model.npz", {"0.weight": weight, "0.bias": bias})
        print(f"trained {step} steps")


if __name__ == "__main__":
    main()
