"""How much time does fingerprinting add to a job? Runs a small torch job bare and with collect().

Both variants run as fresh subprocesses, alternating, so drift on the machine hits both alike. The job
imports torch and does a few matmuls; the second variant also calls collect() at the end and writes
its JSON, as the guest does at exit. Prints the medians of wall and CPU time for each variant and the
time added (the median of the paired differences, which is steadier on a busy machine than the
difference of medians); exits 1 if the added wall time exceeds the budget (0.3 s by default).

    python scripts/bench_fingerprint.py [--repeats 9] [--budget 0.3]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

JOB = """\
import sys, time
import torch

torch.manual_seed(0)
x = torch.randn(512, 512)
for _ in range(10):
    x = torch.tanh(x @ x.T / 512)
if len(sys.argv) > 1:
    import json
    started = time.perf_counter()
    from reprobox.guest.fingerprint import collect

    fingerprint = collect()
    with open(sys.argv[1], "w", encoding="utf-8") as stream:
        json.dump(fingerprint, stream)
    sys.stderr.write(f"collect_seconds={time.perf_counter() - started:.6f}\\n")
"""


@dataclass(frozen=True)
class Run:
    wall: float  # seconds from start to exit
    cpu: float  # user + system seconds of the job process
    collect: float | None  # seconds import + collect() + write took inside the job, when it ran


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(job: Path, output: Path | None) -> Run:
    command = [sys.executable, str(job), *([str(output)] if output else [])]
    cpu_before, started = children_cpu(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    wall, cpu = time.perf_counter() - started, children_cpu() - cpu_before
    marker = "collect_seconds="
    inside = [line.removeprefix(marker) for line in done.stderr.splitlines() if line.startswith(marker)]
    return Run(wall, cpu, float(inside[0]) if inside else None)


def describe(name: str, values: list[float]) -> str:
    return f"{name:<28}{statistics.median(values):7.3f} s   [{min(values):.3f} .. {max(values):.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time added to a torch job by reprobox's collect().")
    parser.add_argument("--repeats", type=int, default=9, help="runs of each variant (default 9)")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds collect() may add (default 0.3)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="reprobox-bench-") as scratch:
        job = Path(scratch) / "job.py"
        job.write_text(JOB, encoding="utf-8")
        output = Path(scratch) / "fingerprint.json"
        run_once(job, None)  # warm the file cache for both variants
        run_once(job, output)
        pairs = [(run_once(job, None), run_once(job, output)) for _ in range(args.repeats)]
        fingerprint_bytes = output.stat().st_size

    bare = [b for b, _ in pairs]
    fingerprinted = [f for _, f in pairs]
    added_wall = statistics.median(f.wall - b.wall for b, f in pairs)
    added_cpu = statistics.median(f.cpu - b.cpu for b, f in pairs)
    print(f"runs per variant            {args.repeats} (alternating)")
    print(describe("bare job, wall", [r.wall for r in bare]))
    print(describe("with collect(), wall", [r.wall for r in fingerprinted]))
    print(describe("bare job, CPU", [r.cpu for r in bare]))
    print(describe("with collect(), CPU", [r.cpu for r in fingerprinted]))
    print(describe("collect() inside the job", [r.collect for r in fingerprinted if r.collect is not None]))
    print(f"added wall (paired median)  {added_wall:+7.3f} s   budget {args.budget:.3f} s")
    print(f"added CPU (paired median)   {added_cpu:+7.3f} s")
    print(f"fingerprint size            {fingerprint_bytes} bytes")
    if added_wall > args.budget:
        print(f"FAIL: fingerprinting adds {added_wall:.3f} s, more than the {args.budget:.3f} s budget")
        return 1
    print("OK: within budget")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
