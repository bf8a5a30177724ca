"""Benchmark the hash trail and the early verdict, measured side by side in one run.

1. The example job (examples/tiny-mlp) on the local runtime with no trail, a trail every step, and a
   trail every 100 steps, alternating, in CPU seconds of all its processes; targets: every step at most
   10% more, every 100 steps at most 1% more.
2. A job made nondeterministic at optimizer step 20 of 1000 (tests/jobs/diverge-at-step, made heavier):
   `verify --runs 2` in full against `verify --stop-on-divergence --runs 2`; target: the early verdict in
   at most 25% of the full verify's time.

Exit status 1 when a target is missed. Medians of alternating repeats; the machine should be quiet.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "tiny-mlp" / "job.yaml"
DIVERGE_CODE = ROOT / "tests" / "jobs" / "diverge-at-step"
TRAIL_EVERY_STEP_TARGET = 1.10
TRAIL_EVERY_100_TARGET = 1.01
EARLY_VERDICT_TARGET = 0.25


def reprobox(*args: str) -> float:
    """Wall seconds of one reprobox command."""
    return _timed(*args)[0]


def reprobox_cpu(*args: str) -> float:
    """CPU seconds (user + system) the command and all its processes used: steadier than wall time when
    other work shares the machine, and what a per-step hook actually costs."""
    return _timed(*args)[1]


def _timed(*args: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "reprobox", *args, "--runtime", "local", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"reprobox {' '.join(args)} failed with exit {done.returncode}")
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench_trail(runs_dir: Path, repeats: int) -> dict[str, float]:
    variants = {"none": [], "every 1": ["--trail", "1"], "every 100": ["--trail", "100"]}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, flags in variants.items():
            times[name].append(reprobox_cpu("run", str(EXAMPLE), "--runs-dir", str(runs_dir), *flags))
    return {name: statistics.median(values) for name, values in times.items()}


def bench_early_verdict(runs_dir: Path, repeats: int) -> tuple[float, float]:
    job = runs_dir / "diverge-1000.yaml"
    job.write_text(
        "version: 1\nname: diverge-1000\ncommand: [python, train.py]\ncheckpoints: ['*.pt']\n"
        f"code: {DIVERGE_CODE}\n"
        "env: {DIVERGE_AT: '20', STEPS: '1000', FEATURES: '256', HIDDEN: '1024', BATCH: '256'}\n"
        "determinism: {threads: 1}\n"
    )
    full, early = [], []
    for _ in range(repeats):
        full.append(reprobox("verify", str(job), "--runs", "2", "--runs-dir", str(runs_dir)))
        early.append(
            reprobox("verify", str(job), "--runs", "2", "--stop-on-divergence", "--runs-dir", str(runs_dir))
        )
    return statistics.median(full), statistics.median(early)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    missed = []
    with tempfile.TemporaryDirectory(prefix="reprobox-bench-trail-") as tmp:
        runs_dir = Path(tmp)
        medians = bench_trail(runs_dir, args.repeats)
        base = medians["none"]
        for name, target in (("every 1", TRAIL_EVERY_STEP_TARGET), ("every 100", TRAIL_EVERY_100_TARGET)):
            ratio = medians[name] / base
            print(f"trail {name:>9}: {medians[name]:.3f} CPU s vs {base:.3f} without", end="")
            print(f" (ratio {ratio:.3f}; target <= {target})")
            if ratio > target:
                missed.append(f"trail {name}")
        full, early = bench_early_verdict(runs_dir, max(1, args.repeats // 2))
        ratio = early / full
        print(f"early verdict: {early:.2f} s vs full verify {full:.2f} s", end="")
        print(f" (ratio {ratio:.3f}; target <= {EARLY_VERDICT_TARGET})")
        if ratio > EARLY_VERDICT_TARGET:
            missed.append("early verdict")
    print("targets met" if not missed else f"targets MISSED: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
