"""How much time does fingerprinting add to a job? Runs a small torch job bare and with collect().

Both variants run as fresh subprocesses, alternating, so drift on the machine hits both alike. The job
imports torch and does a few matmuls; the second variant also calls collect() at the end and writes
its JSON, as the guest does at exit. Prints the medians and the difference; exits 1 if collect()
adds more than the budget (0.3 s by default).

    python scripts/bench_fingerprint.py [--repeats 7] [--budget 0.3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
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


def run_once(job: Path, output: Path | None) -> tuple[float, float | None]:
    """Wall seconds for one job process, and the in-process collect() seconds when it ran."""
    command = [sys.executable, str(job), *([str(output)] if output else [])]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    inside = [
        line.split("=", 1)[1] for line in done.stderr.splitlines() if line.startswith("collect_seconds=")
    ]
    return wall, float(inside[0]) if inside else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=7, help="runs of each variant (default 7)")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds collect() may add (default 0.3)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="reprobox-bench-") as scratch:
        job = Path(scratch) / "job.py"
        job.write_text(JOB, encoding="utf-8")
        output = Path(scratch) / "fingerprint.json"
        run_once(job, None)  # warm the file cache for both variants
        run_once(job, output)
        bare: list[float] = []
        fingerprinted: list[float] = []
        inside: list[float] = []
        for _ in range(args.repeats):
            bare.append(run_once(job, None)[0])
            wall, collect_seconds = run_once(job, output)
            fingerprinted.append(wall)
            if collect_seconds is not None:
                inside.append(collect_seconds)
        fingerprint_bytes = output.stat().st_size

    bare_median, fingerprinted_median = statistics.median(bare), statistics.median(fingerprinted)
    added = fingerprinted_median - bare_median
    print(f"runs per variant          {args.repeats}")
    print(f"bare job (median)         {bare_median:.3f} s   [{min(bare):.3f} .. {max(bare):.3f}]")
    print(
        f"with collect() (median)   {fingerprinted_median:.3f} s"
        f"   [{min(fingerprinted):.3f} .. {max(fingerprinted):.3f}]"
    )
    print(f"added (difference)        {added:+.3f} s   budget {args.budget:.3f} s")
    print(f"collect() in-process      {statistics.median(inside):.3f} s median (import + collect + write)")
    print(f"fingerprint size          {fingerprint_bytes} bytes")
    if added > args.budget:
        print(f"FAIL: fingerprinting adds {added:.3f} s, more than the {args.budget:.3f} s budget")
        return 1
    print("OK: within budget")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
