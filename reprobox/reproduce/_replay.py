"""The author's settings replayed: their job file with their seed, determinism, effective thread
count and environment, and a note for every place where this machine differs."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from reprobox import attest, stackdiff
from reprobox.errors import UsageError
from reprobox.guest.determinism import determinism_from_json
from reprobox.jobfile import REDACTED, JobSpec, Trail, load_job
from reprobox.reproduce._model import ReproduceOptions

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def replay_job(
    attestation: attest.Attestation, code_dir: Path, options: ReproduceOptions, notes: list[str]
) -> tuple[JobSpec, dict[str, str], dict[str, Any]]:
    """The author's job as it ran for them: their job file, seed, determinism, threads and environment."""
    job_file = attest.job_file_in(attestation, code_dir)
    spec = load_job(job_file)
    if spec.code.resolve() != code_dir.resolve():
        raise UsageError(
            f"job file {job_file} runs the code in {spec.code}, not in {code_dir}; pass --code {spec.code}"
        )
    execution = attestation.execution
    determinism = determinism_from_json(execution["determinism"])
    author_threads = _author_threads(execution["threads"])
    threads = options.threads or determinism.threads or author_threads
    if options.threads is not None and options.threads != author_threads:
        notes.append(
            f"running with {options.threads} threads (--threads); the author's runs used {author_threads}"
        )
    elif determinism.threads is None and author_threads is not None:
        notes.append(
            f"the job does not pin its thread count; replaying the author's {author_threads} threads "
            "(set determinism.threads in the job file to make this explicit)"
        )
    pinned_by_replay = options.threads is None and determinism.threads is None and threads is not None
    extra_env: dict[str, str] = {}
    if threads is None:  # nothing to pin torch with: at least give OpenMP/MKL what the author had
        recorded = execution["threads"]
        extra_env = {k: str(recorded[k]) for k in THREAD_VARIABLES if isinstance(recorded.get(k), str)}
    env = _replayed_env(spec.env, execution["env"], notes)
    trail_every = execution.get("trail_every")
    spec = spec.with_overrides(
        seed=int(execution["seed"]),
        determinism=replace(determinism, threads=threads),
        env=env,
        trail=Trail(every=int(trail_every)) if trail_every else spec.trail,
    )
    world_size = execution.get("world_size")
    if isinstance(world_size, int) and world_size != spec.launcher.world_size:
        notes.append(
            f"the author's runs had world size {world_size}; this job file starts {spec.launcher.world_size}"
        )
    settings = {
        "seed": spec.seed,
        "determinism": asdict(spec.determinism),
        "threads": {
            "used": threads,
            "author": author_threads,
            "overridden": options.threads is not None,
            "pinned_by_replay": threads if pinned_by_replay else None,
        },
        "world_size": spec.launcher.world_size,
        "env": sorted(env),
        "extra_env": extra_env,
        "trail_every": spec.trail.every if spec.trail else None,
    }
    return spec, extra_env, settings


def without_replay_pins(
    diffs: list[stackdiff.FieldDifference], pin: int | None
) -> list[stackdiff.FieldDifference]:
    """The differences less the OMP/MKL/OpenBLAS variables that only differ because the replay set them
    to the author's effective thread count `pin` (which torch's own counts, still compared, show to be
    the same)."""
    if pin is None:
        return diffs
    pinned = {f"software.threads.{name}" for name in THREAD_VARIABLES}
    return [d for d in diffs if not (d.field in pinned and d.a is None and d.b == str(pin))]


def _replayed_env(current: dict[str, str], author: dict[str, Any], notes: list[str]) -> dict[str, str]:
    """The author's job environment; secrets (recorded redacted) come from this machine's environment."""
    env = dict(current)
    for key, value in author.items():
        if value == REDACTED:
            if key in current:
                notes.append(
                    f"env {key} is a secret: its value comes from your environment, not the author's"
                )
            continue
        if isinstance(value, str) and attest.names_the_machine(value):
            notes.append(
                f"env {key} named a folder of the author's machine ({value!r} as published): "
                f"its value here is the job file's, {current.get(key)!r}"
            )
            continue
        if env.get(key) != str(value):
            notes.append(f"env {key} is the author's {value!r}, not {env.get(key)!r} as expanded here")
        env[key] = str(value)
    return env


def _author_threads(recorded: dict[str, Any]) -> int | None:
    """torch's intra-op count; for a job that never imported torch, the OMP_NUM_THREADS it ran with."""
    torch_threads = _int_or_none(recorded.get("torch_intra_op"))
    if torch_threads is not None:
        return torch_threads
    omp = recorded.get("OMP_NUM_THREADS")
    return _int_or_none(int(omp)) if isinstance(omp, str) and omp.isdigit() else None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
