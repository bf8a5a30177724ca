"""Benchmark the docker runtime against bare `docker run`, and the "is it already built?" path.

(a) `reprobox run JOB --runtime docker` of a trivial job (`python3 -c pass`) as a user runs it: the
    controller's start-up, image check, guest, hashing, fingerprint and manifest included, versus
(b) `docker run --rm --entrypoint python3 IMAGE -c pass` of the same image, alternating, several repeats;
(a') the same job through DockerRuntime.run alone (where the remaining overhead sits);
(c) ensure_image on an unchanged context: connect, plan, find the tag, no build step.
Prints medians and exits 1 when a target is missed (overhead of (a) over (b) <= 1.0 s; (c) <= 1.0 s).

Usage: python3 scripts/bench_docker.py [--repeats N] [--base-image IMAGE] [--wheelhouse DIR] [--lock cpu]
The image is built first if needed (not timed); the defaults suit this machine's offline setup.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reprobox import progress
from reprobox.engine import connect
from reprobox.jobfile import ImageSpec, JobSpec
from reprobox.runtimes.base import RunPlan
from reprobox.runtimes.docker import DockerRuntime, ensure_image

OVERHEAD_TARGET = 1.0
REUSE_TARGET = 1.0
CACHE = Path(os.environ.get("REPROBOX_CACHE", Path.home() / ".cache" / "reprobox"))


class Discard:
    def write(self, chunk: bytes) -> None:
        pass


def reprobox_run(runtime: DockerRuntime, workdir: Path, index: int) -> float:
    code, run_dir = workdir / "code", workdir / f"run-{index}"
    code.mkdir(exist_ok=True)
    (run_dir / "outputs").mkdir(parents=True)
    command = ("python3", "-c", "pass")
    job = JobSpec(job_file=code / "job.yaml", name="bench", command=command, code=code)
    run_id = f"bench-{time.time_ns()}"
    env = {"REPROBOX_SEED": "0", "REPROBOX_RUN_ID": run_id}
    plan = RunPlan(job=job, run_id=run_id, run_dir=run_dir, guest_env=env, command=command, timeout=120)
    started = time.perf_counter()
    outcome = runtime.run(plan, Discard())
    elapsed = time.perf_counter() - started
    if not outcome.succeeded:
        sys.exit(f"bench_docker: the trivial job failed ({outcome.failure_reason()})")
    return elapsed


def cli_run(args: argparse.Namespace, workdir: Path) -> float:
    """The whole `reprobox run` command, as a subprocess."""
    job = workdir / "cli-job"
    job.mkdir(exist_ok=True)
    (job / "job.yaml").write_text('version: 1\nname: bench\ncommand: [python3, -c, "pass"]\n')
    command = [sys.executable, "-m", "reprobox", "run", str(job), "--runtime", "docker", "-q"]
    command += ["--runs-dir", str(workdir / "runs"), "--base-image", args.base_image]
    command += ["--wheelhouse", str(args.wheelhouse), "--lock", args.lock]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def bare_run(image_id: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "python3", image_id, "-c", "pass"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def reuse_check(args: argparse.Namespace) -> tuple[float, list[str]]:
    started = time.perf_counter()
    engine = connect()
    with progress.reporting(progress.Recorder()) as reported:
        ensure_image(
            ImageSpec(),
            engine=engine,
            base_image=args.base_image,
            wheelhouse=args.wheelhouse,
            lock=args.lock,
        )
    elapsed = time.perf_counter() - started
    engine.client.close()
    return elapsed, [line for line in reported.lines if line.startswith("Step ")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--base-image", default=os.environ.get("REPROBOX_BASE_IMAGE", "reprobox/offline-base:bookworm")
    )
    parser.add_argument(
        "--wheelhouse", type=Path, default=Path(os.environ.get("REPROBOX_WHEELHOUSE", CACHE / "wheelhouse"))
    )
    parser.add_argument("--lock", default=os.environ.get("REPROBOX_LOCK", "cpu"))
    args = parser.parse_args()

    engine = connect()
    print("bench_docker: preparing the image (built now if needed; not timed) ...", flush=True)
    info = ensure_image(
        ImageSpec(), engine=engine, base_image=args.base_image, wheelhouse=args.wheelhouse, lock=args.lock
    )
    runtime = DockerRuntime(info, engine=engine)
    with tempfile.TemporaryDirectory(prefix="reprobox-bench-") as tmp:
        workdir = Path(tmp)
        reprobox_run(runtime, workdir, -1)  # warm-up of every path, not counted
        cli_run(args, workdir)
        bare_run(info.id)
        reprobox_times, bare_times, cli_times = [], [], []
        for index in range(args.repeats):
            if index % 2 == 0:
                cli_times.append(cli_run(args, workdir))
                reprobox_times.append(reprobox_run(runtime, workdir, index))
                bare_times.append(bare_run(info.id))
            else:
                bare_times.append(bare_run(info.id))
                reprobox_times.append(reprobox_run(runtime, workdir, index))
                cli_times.append(cli_run(args, workdir))
    reuse = [reuse_check(args) for _ in range(args.repeats)]
    reuse_times = [seconds for seconds, _ in reuse]
    build_steps = [step for _, steps in reuse for step in steps]

    reprobox_median, bare_median = statistics.median(reprobox_times), statistics.median(bare_times)
    cli_median = statistics.median(cli_times)
    overhead = cli_median - bare_median
    reuse_median = statistics.median(reuse_times)
    print(
        f"image {info.tags[0] if info.tags else info.id} ({info.id[:19]}), {args.repeats} alternating repeats"
    )
    print(
        f"  (a) reprobox run --runtime docker (the CLI)     : median {cli_median:.3f} s  "
        f"[{', '.join(f'{t:.2f}' for t in cli_times)}]"
    )
    print(
        f"  (a') DockerRuntime.run alone, guest included    : median {reprobox_median:.3f} s  "
        f"[{', '.join(f'{t:.2f}' for t in reprobox_times)}]"
    )
    print(
        f"  (b) docker run --rm ... python3 -c pass         : median {bare_median:.3f} s  "
        f"[{', '.join(f'{t:.2f}' for t in bare_times)}]"
    )
    print(
        f"      overhead (a) - (b)                           : {overhead:+.3f} s"
        f"  (target <= {OVERHEAD_TARGET:.1f} s)"
    )
    print(
        f"  (c) unchanged context, is-it-built path         : median {reuse_median:.3f} s  "
        f"(target <= {REUSE_TARGET:.1f} s), build steps run: {len(build_steps)}"
    )
    missed = []
    if overhead > OVERHEAD_TARGET:
        missed.append(f"run overhead {overhead:.3f} s > {OVERHEAD_TARGET} s")
    if reuse_median > REUSE_TARGET:
        missed.append(f"reuse check {reuse_median:.3f} s > {REUSE_TARGET} s")
    if build_steps:
        missed.append(f"an unchanged context ran {len(build_steps)} build steps")
    if missed:
        print("bench_docker: MISSED: " + "; ".join(missed))
        return 1
    print("bench_docker: all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
