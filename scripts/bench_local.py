"""Benchmark the local runtime's costs, measured side by side in one run.

1. The startup hook in a Python process that never imports torch: `python -c pass` with and without
   the hook, alternating; target: at most 20 ms added (median).
2. `reprobox run --runtime local` of a small torch job (ten training steps of a small model, its
   state saved with torch.save) against running the same command bare, alternating: CPU time (user +
   system of the whole process tree) and wall time side by side, with the ratio and the seconds added;
   targets: at most 0.25 s of CPU and 0.3 s of wall added per run beyond the job itself (the median of
   the differences between the pairs, at least 7 pairs; 25 by default: the job's own CPU varies from run
   to run by a tenth of a second, more than what is measured, and the quartiles of the pairs' differences
   are printed beside the median to show that spread).

reprobox runs as users run it: installed from a wheel of this checkout, as `pipx` or `uv tool install`
install it (its dependencies read from this environment, through a path entry). The checkout's own
editable install puts an import hook into every Python process of its environment, about 18 ms of CPU
each, which no user's install has; `--checkout` measures the checkout as it is installed instead.

Both sides run with a bytecode cache (in a private PYTHONPYCACHEPREFIX, warmed first), as an installed
package has: where PYTHONDONTWRITEBYTECODE is set, every process would otherwise recompile reprobox's
modules from source, which measures the machine's setting rather than reprobox.

Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

HOOK_TARGET_S = 0.020
RUN_CPU_TARGET_S = 0.25
RUN_WALL_TARGET_S = 0.3
TORCH_JOB = """\
import os

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    inputs, targets = torch.randn(64, 32), torch.randint(0, 10, (64,))
    loss = torch.nn.functional.cross_entropy(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
torch.save(state, os.path.join(os.environ.get("REPROBOX_OUTPUT_DIR", "."), "model.pt"))
print(f"loss {loss.item():.4f}")
"""


CACHE_PREFIX = Path(tempfile.mkdtemp(prefix="reprobox-bench-pycache-"))
ROOT = Path(__file__).resolve().parents[1]


def installed_as_a_tool(folder: Path) -> Path:
    """The Python of a fresh environment holding reprobox from a wheel of this checkout, as a tool install
    makes one; its dependencies are this environment's, on a path entry (no .pth file of this one runs)."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", folder, ROOT],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", folder / "tool"], check=True)
    python = folder / "tool" / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (wheel,) = folder.glob("reprobox-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(purelib)
    Path(purelib, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def with_bytecode(env: dict[str, str] | None) -> dict[str, str]:
    """The environment with a warm bytecode cache of our own, whatever the machine's setting."""
    result = {k: v for k, v in (os.environ if env is None else env).items() if k != "PYTHONDONTWRITEBYTECODE"}
    result["PYTHONPYCACHEPREFIX"] = str(CACHE_PREFIX)
    return result


def children_cpu() -> float:
    """User and system seconds of every child process waited for so far (and of their children)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_both(
    command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the whole process tree) of one run of ``command``."""
    env = with_bytecode(env)
    cpu_before = children_cpu()
    started = time.perf_counter()
    subprocess.run(
        command, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - started, children_cpu() - cpu_before


def timed(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> float:
    return timed_both(command, env, cwd)[0]


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


@dataclass(frozen=True)
class Side:
    """Median wall and CPU seconds of one side of the comparison."""

    wall: float
    cpu: float


def median_side(samples: list[tuple[float, float]]) -> Side:
    return Side(statistics.median(w for w, _ in samples), statistics.median(c for _, c in samples))


def bench_run(repeats: int, *, checkout: bool) -> tuple[Side, Side, list[tuple[float, float]]]:
    """The torch job bare and under `reprobox run --runtime local`, alternating: each side's medians and
    what each pair's reprobox run added (wall, CPU)."""
    with tempfile.TemporaryDirectory(prefix="reprobox-bench-") as tmp:
        controller = sys.executable if checkout else installed_as_a_tool(Path(tmp))
        job = Path(tmp) / "job"
        job.mkdir()
        (job / "train.py").write_text(TORCH_JOB)
        command = [sys.executable, "train.py"]
        (job / "job.yaml").write_text(
            f"version: 1\nname: torch-small\ncommand: {json.dumps(command)}\ncheckpoints: ['*.pt']\n"
        )
        # started outside this checkout: `python -m` puts the folder it starts in first on sys.path, and
        # the checkout's reprobox there would stand in for the wheel's
        reprobox = [str(controller), "-m", "reprobox", "run", str(job), "--runtime", "local", "-q"]
        reprobox += ["--runs-dir", str(Path(tmp) / "runs")]
        timed(reprobox, cwd=Path(tmp))  # warm the file and bytecode caches once
        timed(command, cwd=job)
        bare, managed = [], []
        for _ in range(repeats):
            bare.append(timed_both(command, cwd=job))
            managed.append(timed_both(reprobox, cwd=Path(tmp)))
        added = [(m[0] - b[0], m[1] - b[1]) for b, m in zip(bare, managed, strict=True)]
        return median_side(bare), median_side(managed), added


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=25)  # the job alone varies by a tenth of a second
    parser.add_argument("--checkout", action="store_true", help="run reprobox as this checkout installs it")
    args = parser.parse_args()

    bare, hooked = bench_hook(args.repeats * 2)
    hook_added = hooked - bare
    print(f"startup hook: python -c pass {bare * 1000:.1f} ms bare, {hooked * 1000:.1f} ms hooked")
    print(
        f"  added {hook_added * 1000:.1f} ms (ratio {hooked / bare:.2f}x); "
        f"target <= {HOOK_TARGET_S * 1000:.0f} ms"
    )

    bare_run, managed_run, pairs = bench_run(max(args.repeats, 7), checkout=args.checkout)
    added = median_side(pairs)
    cpu_added, wall_added = added.cpu, added.wall
    cpu_quartiles = statistics.quantiles([cpu for _, cpu in pairs], n=4)
    installed = "as this checkout installs it" if args.checkout else "installed from a wheel, as a tool"
    print(f"reprobox run --runtime local of a small torch job, reprobox {installed} (median of each side):")
    print(f"  {'':8} {'bare':>9} {'reprobox':>9} {'ratio':>7} {'added':>9}")
    for label, bare_s, managed_s in (
        ("CPU", bare_run.cpu, managed_run.cpu),
        ("wall", bare_run.wall, managed_run.wall),
    ):
        print(
            f"  {label:8} {bare_s:8.3f}s {managed_s:8.3f}s {managed_s / bare_s:6.2f}x "
            f"{managed_s - bare_s:+8.3f}s"
        )
    print(
        f"  added per run (median of the pairs): {cpu_added:.3f} s of CPU (target <= {RUN_CPU_TARGET_S} s), "
        f"{wall_added:.3f} s of wall (target <= {RUN_WALL_TARGET_S} s)"
    )
    print(
        f"  CPU added, quartiles of the {len(pairs)} pairs: "
        + " / ".join(f"{q:.3f}" for q in cpu_quartiles)
        + " s (the job's own CPU varies from run to run)"
    )

    missed = []
    if hook_added > HOOK_TARGET_S:
        missed.append("startup hook")
    if cpu_added > RUN_CPU_TARGET_S:
        missed.append("local run CPU overhead")
    if wall_added > RUN_WALL_TARGET_S:
        missed.append("local run wall overhead")
    print("targets met" if not missed else f"targets MISSED: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        shutil.rmtree(CACHE_PREFIX, ignore_errors=True)
