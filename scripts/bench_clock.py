"""Benchmark the run-specific masks that decide which differing values are readings of a run's clock.

Values are many: a verdict masks every differing value of every output, and a text log wherever its
lines differ. Measured in one process, each case on a cold decoder cache (a fresh window) then warm:

1. a 100,000-line log whose every line starts with a stamp and carries the job's pid;
2. 100,000 short values that are Unix times (7% inside the window);
3. 100,000 short values that are not stamps (``loss 0.0421``).

Targets (medians of 3, cold cache): at most 30 us per log line and 30 us per short value. Exit status 1
when a target is missed. The machine should be quiet.
"""

from __future__ import annotations

import argparse
import calendar
import statistics
import sys
import time
from collections.abc import Callable

from reprobox.runspecific import RunContext, Window, mask

START = calendar.timegm((2026, 11, 28, 0, 37, 20, 0, 0, 0))
TARGET_US = 30.0


def context() -> RunContext:
    """A fresh window each time: its cache of decoded tokens starts empty."""
    return RunContext(
        paths=("/runs/job/20261128T003720Z-aaaaaa",),
        run_id="20261128T003720Z-aaaaaa",
        hostname="gpu7",
        window=Window(START, START + 3600, (3600,)),
        pids=frozenset({2264, 2270}),
    )


def cases(count: int) -> dict[str, tuple[Callable[[RunContext], object], int]]:
    lines = [
        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(START + i * 0.03))},{i % 1000:03d} INFO "
        f"MainThread:2264 [trainer.py:step():81] step {i} loss {0.5 / (i + 1):.6f} lr 0.001"
        for i in range(count)
    ]
    log = "\n".join(lines)
    stamps = [f"{START + i * 0.5:.3f}" for i in range(count)]
    plain = [f"loss {i * 0.001:.4f}" for i in range(count)]
    return {
        "log line": (lambda run: mask(log, run), count),
        "Unix-time value": (lambda run: [mask(v, run) for v in stamps], count),
        "plain value": (lambda run: [mask(v, run) for v in plain], count),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    missed = False
    for name, (work, count) in cases(args.count).items():
        cold, warm = [], []
        for _ in range(args.repeats):
            run = context()
            for found in (cold, warm):
                started = time.perf_counter()
                work(run)
                found.append((time.perf_counter() - started) / count * 1e6)
        cold_us, warm_us = statistics.median(cold), statistics.median(warm)
        verdict = "ok" if cold_us <= TARGET_US else "MISSED"
        missed |= verdict != "ok"
        print(
            f"{name:16} cold {cold_us:6.1f} us, warm {warm_us:6.1f} us (target {TARGET_US:g} us): {verdict}"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
