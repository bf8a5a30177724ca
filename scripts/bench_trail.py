"""Benchmark the hash trail and the early verdict, measured side by side in one run.

1. The example job's training loop (examples/tiny-mlp) with no trail, a trail every step and a trail
   every 100 steps, epochs alternating in one process; targets: every step at most 10% slower, every
   100 steps at most 1%.
2. A job made nondeterministic at optimizer step 20 of 1000 (tests/jobs/diverge-at-step, made heavier):
   `verify --runs 2` in full against `verify --stop-on-divergence --runs 2`, each timed twice: until its
   verdict line (read from its stderr as it runs: the verdict is said there before any drill-down's
   replays; a command that says it only at its end has it at its end) and to its end. Target: the
   early verdict's line in at most 25% of the time the full verify takes to give its verdict.

Exit status 1 when a target is missed. Medians of alternating repeats; the machine should be quiet.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "tiny-mlp" / "job.yaml"
DIVERGE_CODE = ROOT / "tests" / "jobs" / "diverge-at-step"
TRAIL_EVERY_STEP_TARGET = 1.10
TRAIL_EVERY_100_TARGET = 1.01
EARLY_VERDICT_TARGET = 0.25
VERDICTS = ("not reproducible:", "bit-identical:", "reproduced:", "no verdict:")  # a result's first line


@dataclass(frozen=True)
class Timed:
    """Wall seconds of one reprobox command: until its verdict line showed, and until it ended."""

    verdict: float
    total: float


def reprobox(*args: str) -> Timed:
    """Run a reprobox command, reading its stderr (plain progress lines: not a terminal) as it comes,
    and note when the verdict line (the first line of its result on stdout) appeared there."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "reprobox", *args, "--runtime", "local"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    result: list[str] = []
    stdout = child.stdout

    def read_result() -> None:  # the job's output comes on stdout too: drained alongside stderr
        result.extend(stdout)

    reader = threading.Thread(target=read_result)
    reader.start()
    said = [(time.perf_counter() - started, line.rstrip("\n")) for line in child.stderr]
    code = child.wait()
    reader.join()
    total = time.perf_counter() - started
    if code not in (0, 1):
        raise SystemExit(f"reprobox {' '.join(args)} failed with exit {code}")
    # the result comes after the job's own output: its first line is the last that reads as a verdict
    verdict = next((line.rstrip("\n") for line in reversed(result) if line.startswith(VERDICTS)), None)
    if verdict is None:
        raise SystemExit(f"reprobox {' '.join(args)} printed no verdict")
    return Timed(next((at for at, line in said if line == verdict), total), total)


def bench_trail(runs_dir: Path, repeats: int, workers: int = 2) -> dict[str, float]:
    """The example's training loop in one process, epochs alternating between no trail and a trail.

    Whole runs vary by several percent from run to run on a shared machine, more than the 1% being
    measured; alternating epochs inside one process cancels that drift. `workers=2` is the example as
    written; `workers=0` loads data in the training process, so steps are cheaper and the hook's share
    is larger (a stricter figure).
    """
    import torch
    from torch import nn
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils.data import DataLoader

    from reprobox.guest import trail

    example = _load_example()
    label_map = {name: index for index, name in enumerate(sorted(example.SPECIES))}
    data = example.NoisyPoints(2048, label_map)
    loader = DataLoader(data, batch_size=64, shuffle=True, num_workers=workers)
    model = nn.Sequential(
        nn.Linear(example.FEATURES, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, len(label_map))
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()

    def epoch() -> float:
        started = time.perf_counter()
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss_fn(model(inputs), targets).backward()
            optimizer.step()
        return time.perf_counter() - started

    trail._watch_backward(torch)  # as installed in a job: the loss is picked up from backward()
    variants: dict[str, int | None] = {"none": None, "every 1": 1, "every 100": 100}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for name in variants:
        (runs_dir / name.replace(" ", "-")).mkdir()
    recorders = {
        name: trail._StepRecorder(torch, runs_dir / name.replace(" ", "-"), every, None)
        for name, every in variants.items()
        if every is not None
    }  # one per variant for the whole benchmark, as in a job (parameter names are found once)
    epoch()  # warm-up
    for _ in range(repeats * 6):
        for name in variants:
            recorder = recorders.get(name)
            if recorder is None:
                times[name].append(epoch())
                continue
            handle = register_optimizer_step_post_hook(lambda opt, _a, _k, t=recorder: t.after_step(opt))
            trail._TRAIL = recorder
            try:
                times[name].append(epoch())
            finally:
                handle.remove()
                trail._TRAIL = None
    return {name: statistics.median(values) for name, values in times.items()}


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tiny_mlp_train", EXAMPLE.parent / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_early_verdict(runs_dir: Path, repeats: int) -> tuple[Timed, Timed]:
    job = runs_dir / "diverge-1000.yaml"
    job.write_text(
        "version: 1\nname: diverge-1000\ncommand: [python, train.py]\ncheckpoints: ['*.pt']\n"
        f"code: {DIVERGE_CODE}\n"
        "env: {DIVERGE_AT: '20', STEPS: '1000', FEATURES: '256', HIDDEN: '1024', BATCH: '256'}\n"
        "determinism: {threads: 1}\n"
    )
    full: list[Timed] = []
    early: list[Timed] = []
    for _ in range(repeats):
        full.append(reprobox("verify", str(job), "--runs", "2", "--runs-dir", str(runs_dir)))
        early.append(
            reprobox("verify", str(job), "--runs", "2", "--stop-on-divergence", "--runs-dir", str(runs_dir))
        )
    return _median(full), _median(early)


def _median(times: list[Timed]) -> Timed:
    return Timed(statistics.median(t.verdict for t in times), statistics.median(t.total for t in times))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--loader-workers",
        type=int,
        default=2,
        help="DataLoader workers (2 as in the example; 0 is stricter)",
    )
    args = parser.parse_args()
    missed = []
    with tempfile.TemporaryDirectory(prefix="reprobox-bench-trail-") as tmp:
        runs_dir = Path(tmp)
        medians = bench_trail(runs_dir, args.repeats, args.loader_workers)
        base = medians["none"]
        for name, target in (("every 1", TRAIL_EVERY_STEP_TARGET), ("every 100", TRAIL_EVERY_100_TARGET)):
            ratio = medians[name] / base
            print(f"trail {name:>9}: {medians[name] * 1000:.1f} ms/epoch vs {base * 1000:.1f}", end="")
            print(f" (ratio {ratio:.3f}; target <= {target})")
            if ratio > target:
                missed.append(f"trail {name}")
        full, early = bench_early_verdict(runs_dir, max(1, args.repeats // 2))
        ratio = early.verdict / full.verdict
        print(
            f"early verdict: verdict line {early.verdict:.2f} s vs full verify {full.verdict:.2f} s "
            f"(ratio {ratio:.3f}; target <= {EARLY_VERDICT_TARGET}); to the end {early.total:.2f} s "
            f"vs {full.total:.2f} s (ratio {early.total / full.total:.3f})"
        )
        if ratio > EARLY_VERDICT_TARGET:
            missed.append("early verdict")
    print("targets met" if not missed else f"targets MISSED: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
