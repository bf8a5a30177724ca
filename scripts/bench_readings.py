"""Benchmark what the guest's record of clock readings costs a job per reading.

Every clock the guest wraps (``time.time``, ``perf_counter``, ``monotonic``, ``datetime.now``,
``datetime.utcnow``) is called in a tight loop with the record installed, beside the original it wraps,
in one process: best of ``--repeats`` rounds of ``--calls`` calls each. Printed per clock: the original's
cost, the wrapped cost and what the wrapper adds. Target: at most 2 us added per reading (a Python frame
and the site of its line; a training loop reads its clock a few times a step). Exit status 1 when a
target is missed. The machine should be quiet.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import tempfile
import time
from collections.abc import Callable

TARGET_NS = 2000.0


def best_ns(read: Callable[[], object], calls: int, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        started = time.perf_counter_ns()
        for _ in range(calls):
            read()
        best = min(best, (time.perf_counter_ns() - started) / calls)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    originals = {name: getattr(time, name) for name in ("time", "perf_counter", "monotonic")}
    from reprobox.guest import readings

    readings.install(tempfile.mkdtemp(prefix="bench-readings-"))
    from datetime import datetime

    pairs: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        f"time.{name}": (original, getattr(time, name)) for name, original in originals.items()
    }
    for name in ("now", "utcnow"):
        wrapped = getattr(datetime, name)
        pairs[f"datetime.{name}"] = (functools.partial(wrapped.__wrapped__, datetime), wrapped)
    missed = False
    for name, (original, wrapped) in pairs.items():
        if wrapped is original:
            print(f"{name:18} not wrapped here")
            continue
        plain = best_ns(original, args.calls, args.repeats)
        recorded = best_ns(wrapped, args.calls, args.repeats)
        added = recorded - plain
        verdict = "ok" if added <= TARGET_NS else "MISSED"
        missed |= verdict != "ok"
        print(
            f"{name:18} {plain:7.0f} ns plain, {recorded:7.0f} ns recorded, +{added:6.0f} ns"
            f" (x{recorded / plain:4.1f}; target +{TARGET_NS:g} ns): {verdict}"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
