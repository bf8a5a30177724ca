"""Benchmark the first-divergence drill-down, measured side by side in one run.

1. Recording one step: a 4-layer d=256 transformer encoder's training step on CPU with every operation
   recorded (digests, module, source line, saved results) against the same step plain, steps
   alternating in one process; target: at most 5x ("a few times a plain step"). The tiny MLP of
   tests/jobs/diverge-at-step is printed too, without a target: there the per-operation Python cost is
   all there is.
2. The drill-down's cost in a verify: `verify` against `verify --no-drill-down` on a job that diverges
   at step 20 of 200 (tests/jobs/diverge-at-step, trail every step), divided by one run to step 20
   (`run --max-steps 20`); target: at most 2.5 (two replays to that step, side by side, recorded).

Exit status 1 when a target is missed. Medians of alternating repeats; the machine should be quiet.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_trail import reprobox  # noqa: E402 - one way to time a reprobox command

DIVERGE = ROOT / "tests" / "jobs" / "diverge-at-step"
RECORDING_TARGET = 5.0
DRILL_DOWN_TARGET = 2.5


def step(model: Any, batch: Any, optimizer: Any) -> None:
    optimizer.zero_grad()
    model(batch).square().mean().backward()
    optimizer.step()


def bench_recording(repeats: int) -> dict[str, float]:
    """Median seconds of a plain and a recorded training step, for a transformer and a tiny MLP."""
    import torch
    from torch import nn

    from reprobox.guest.oplog import OpRecorder

    torch.manual_seed(0)
    torch.set_num_threads(2)
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True)
    models = {
        "transformer": (nn.TransformerEncoder(layer, num_layers=4), torch.randn(16, 64, 256)),
        "mlp": (nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4)), torch.randn(256, 16)),
    }
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, (model, batch) in models.items():
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            odd_steps = set(range(1, 2 * repeats + 2, 2))  # recorded; the even steps run plain
            recorder = OpRecorder(torch, Path(folder) / name, odd_steps)
            step(model, batch, optimizer)  # warm up
            times: dict[bool, list[float]] = {True: [], False: []}
            recorder.begin(1)
            for index in range(1, 2 * repeats + 1):
                started = time.perf_counter()
                step(model, batch, optimizer)
                recorder.end(index)  # leaves recording after an odd step, enters it after an even one
                times[index in odd_steps].append(time.perf_counter() - started)
            recorder.close()
            results[f"{name}_plain_s"] = statistics.median(times[False])
            results[f"{name}_recorded_s"] = statistics.median(times[True])
    return results


def bench_drill_down(repeats: int) -> dict[str, float]:
    """Median seconds of verify with and without the drill-down, and of one run to the diverging step."""
    with tempfile.TemporaryDirectory() as folder:
        job = Path(folder) / "job"
        job.mkdir()
        (job / "train.py").write_text((DIVERGE / "train.py").read_text())
        (job / "job.yaml").write_text(
            "version: 1\nname: bench-drill-down\ncommand: [python, train.py]\ncheckpoints: ['*.pt']\n"
            "trail: {every: 1}\nenv: {DIVERGE_AT: '20', STEPS: '200', HIDDEN: '256', BATCH: '1024'}\n"
        )
        runs = str(Path(folder) / "runs")
        times: dict[str, list[float]] = {"plain": [], "drill": [], "prefix": []}
        for _ in range(repeats):
            times["plain"].append(reprobox("verify", str(job), "--runs-dir", runs, "--no-drill-down"))
            times["drill"].append(reprobox("verify", str(job), "--runs-dir", runs))
            times["prefix"].append(reprobox("run", str(job), "--runs-dir", runs, "--max-steps", "20"))
    return {f"{name}_s": statistics.median(values) for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    failed = False
    recording = bench_recording(max(3, args.repeats * 2))
    for name in ("transformer", "mlp"):
        ratio = recording[f"{name}_recorded_s"] / recording[f"{name}_plain_s"]
        line = (
            f"{name}: plain step {recording[f'{name}_plain_s'] * 1e3:.1f} ms, recorded "
            f"{recording[f'{name}_recorded_s'] * 1e3:.1f} ms: {ratio:.1f}x"
        )
        if name == "transformer":
            line += f" (target <= {RECORDING_TARGET:.0f}x)"
            failed |= ratio > RECORDING_TARGET
        print(line)
    drill = bench_drill_down(args.repeats)
    extra = (drill["drill_s"] - drill["plain_s"]) / drill["prefix_s"]
    print(
        f"verify {drill['plain_s']:.1f} s, with the drill-down {drill['drill_s']:.1f} s, one run to the "
        f"diverging step {drill['prefix_s']:.1f} s: the drill-down adds {extra:.2f} of those "
        f"(target <= {DRILL_DOWN_TARGET})"
    )
    failed |= extra > DRILL_DOWN_TARGET
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
