"""Benchmark the local runtime's costs, measured side by side in one run.

1. The startup hook in a Python process that never imports torch: `python -c pass` with and without
   the hook, alternating; target: at most 20 ms added (median).
2. `reprobox run --runtime local` of a trivial job against running the same command bare;
   target: at most 0.5 s of wall time added (median).

Both sides run with a bytecode cache (in a private PYTHONPYCACHEPREFIX, warmed first), as an installed
package has: where PYTHONDONTWRITEBYTECODE is set, every process would otherwise recompile reprobox's
modules from source, which measures the machine's setting rather than reprobox.

Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOOK_TARGET_S = 0.020
RUN_TARGET_S = 0.5
TRIVIAL_COMMAND = [sys.executable, "-c", "print('hello')"]


CACHE_PREFIX = Path(tempfile.mkdtemp(prefix="reprobox-bench-pycache-"))


def with_bytecode(env: dict[str, str] | None) -> dict[str, str]:
    """The environment with a warm bytecode cache of our own, whatever the machine's setting."""
    result = {k: v for k, v in (os.environ if env is None else env).items() if k != "PYTHONDONTWRITEBYTECODE"}
    result["PYTHONPYCACHEPREFIX"] = str(CACHE_PREFIX)
    return result


def timed(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> float:
    env = with_bytecode(env)
    started = time.perf_counter()
    subprocess.run(
        command, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - started


def hook_environment(boot_dir: Path) -> dict[str, str]:
    from reprobox.guest import settings

    env = dict(os.environ)
    env.update({settings.HOOK_ACTIVE: "1", settings.SEED: "0", "PYTHONPATH": str(boot_dir)})
    return env


def bench_hook(repeats: int) -> tuple[float, float]:
    from reprobox.guest.entrypoint import _make_boot_dir

    boot_dir = _make_boot_dir()
    try:
        bare_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        hooked_env = hook_environment(boot_dir)
        command = [sys.executable, "-c", "pass"]
        bare, hooked = [], []
        timed(command, hooked_env)  # warm the bytecode cache
        for _ in range(repeats):
            bare.append(timed(command, bare_env))
            hooked.append(timed(command, hooked_env))
        return statistics.median(bare), statistics.median(hooked)
    finally:
        shutil.rmtree(boot_dir, ignore_errors=True)


def bench_run(repeats: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="reprobox-bench-") as tmp:
        job = Path(tmp) / "job"
        job.mkdir()
        (job / "job.yaml").write_text(f"version: 1\nname: trivial\ncommand: {json.dumps(TRIVIAL_COMMAND)}\n")
        reprobox = [sys.executable, "-m", "reprobox", "run", str(job), "--runtime", "local", "-q"]
        reprobox += ["--runs-dir", str(Path(tmp) / "runs")]
        timed(reprobox)  # warm the file cache once
        bare, managed = [], []
        for _ in range(repeats):
            bare.append(timed(TRIVIAL_COMMAND, cwd=job))
            managed.append(timed(reprobox))
        return statistics.median(bare), statistics.median(managed)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    bare, hooked = bench_hook(args.repeats * 2)
    hook_added = hooked - bare
    print(f"startup hook: python -c pass {bare * 1000:.1f} ms bare, {hooked * 1000:.1f} ms hooked")
    print(
        f"  added {hook_added * 1000:.1f} ms (ratio {hooked / bare:.2f}x); "
        f"target <= {HOOK_TARGET_S * 1000:.0f} ms"
    )

    bare_run, managed_run = bench_run(args.repeats)
    run_added = managed_run - bare_run
    print(f"reprobox run --runtime local: {managed_run:.3f} s vs bare command {bare_run:.3f} s")
    print(f"  added {run_added:.3f} s (ratio {managed_run / bare_run:.2f}x); target <= {RUN_TARGET_S} s")

    missed = []
    if hook_added > HOOK_TARGET_S:
        missed.append("startup hook")
    if run_added > RUN_TARGET_S:
        missed.append("local run overhead")
    print("targets met" if not missed else f"targets MISSED: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        shutil.rmtree(CACHE_PREFIX, ignore_errors=True)
