"""Benchmark `verify --vary all` against the budget its design promises: (factors + 1) plain runs.

Measured side by side in one session, on one runtime: the median of `reprobox run JOB` (the whole
command, as a user runs it) and one `reprobox verify JOB --vary all`. The budget is (factors + 1) x the
median run, counting every factor in the registry (those the runtime or job cannot vary run nothing);
the inputs (code snapshot, data digests, the image) are made once and shared by every run of the
matrix. Prints the ratio of the matrix's time to the budget and exits 1 above 1.0.

Usage: python3 scripts/bench_vary.py [--runtime local|docker] [--repeats N] [JOB]
(default: examples/tiny-mlp on the local runtime; for docker set REPROBOX_BASE_IMAGE and
REPROBOX_WHEELHOUSE as the tests do, or have the image built already).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reprobox.forensics.variation import FACTORS

ROOT = Path(__file__).resolve().parents[1]


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: a factor is sensitive, still a whole matrix
        sys.exit(f"bench_vary: {' '.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return elapsed, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("job", nargs="?", type=Path, default=ROOT / "examples" / "tiny-mlp")
    parser.add_argument("--runtime", default="local")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-vary-") as folder:
        runs = str(Path(folder) / "runs")
        base = [sys.executable, "-m", "reprobox"]
        common = [str(args.job), "--runtime", args.runtime, "--runs-dir", runs, "-q"]
        timed([*base, "run", *common])  # warm-up: builds the image, fills caches (not timed)
        singles = [timed([*base, "run", *common])[0] for _ in range(args.repeats)]
        one_run = statistics.median(singles)
        matrix_runs = Path(folder) / "matrix-runs"
        vary = [*base, "verify", *common, "--runs-dir", str(matrix_runs), "--vary", "all", "--json"]
        matrix_time, out = timed([*vary, "--no-attestation"])
        runs_made = sum(1 for m in matrix_runs.glob("*/*/manifest.json") if not m.parent.is_symlink())
    data = json.loads(out)
    budget = (len(FACTORS) + 1) * one_run
    ratio = matrix_time / budget
    print(f"job {args.job} on {args.runtime}: one `reprobox run` {one_run:.2f} s (median of {args.repeats})")
    print(f"verify --vary all: {matrix_time:.2f} s for {runs_made} runs ({len(FACTORS)} factors)")
    print(f"budget (factors + 1) x one run: {budget:.2f} s; ratio {ratio:.2f} (target <= 1.0)")
    print(f"verdict: {data['sentence']}")
    print(f"per matrix run: {matrix_time / runs_made:.2f} s vs {one_run:.2f} s for a plain run")
    return 0 if ratio <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
