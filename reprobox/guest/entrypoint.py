"""Run the user's command deterministically, then record what it produced.

Order matters: the process environment is fixed before the user's interpreter starts (PYTHONHASHSEED
and CUBLAS_WORKSPACE_CONFIG are read only at start-up); the startup hook reaches every Python process
through PYTHONPATH; once the command ends, stray processes are stopped before checkpoints are hashed,
so nothing is still writing to them (`reprobox.guest.processes` runs the command and stops them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reprobox import saferead
from reprobox.guest import (
    determinism,
    processes,
    readings_merge,
    runfacts,
    settings,
    variation,
    watch,
    workcopy,
)
from reprobox.records.guest import GuestRecord, write_guest_record
from reprobox.records.trail import STOP_FILE, STOP_FILE_LIMIT, StoppedEarly
from reprobox.timestamps import utc_now

# The reproducible-builds convention: writers that stamp a file with the time (matplotlib's PDF, SVG and
# PS, gzip, tar and many more) stamp this instead. 1980-01-01, the earliest time a zip entry can hold.
SOURCE_DATE_EPOCH = "SOURCE_DATE_EPOCH"
DEFAULT_SOURCE_DATE_EPOCH = "315532800"
WORKDIR_COPY = (
    "copy"  # the job file's `workdir: copy` (reprobox.jobfile is the controller's: not imported here)
)
FINGERPRINT_LIMIT = 16 * saferead.MIB
MAX_RANK_FILES = 4096


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        sys.stderr.write("usage: python -m reprobox.guest -- COMMAND [ARG...]\n")
        return 2
    env = os.environ
    run_dir = Path(env.get(settings.RUN_DIR) or Path.cwd())
    output_dir = Path(env.get(settings.OUTPUT_DIR) or run_dir / "outputs")
    seed = int(env.get(settings.SEED, "0"))
    det = determinism.settings_from_env(env)
    boot_dir = _make_boot_dir()
    try:
        child_env = job_environment(env, seed, det, boot_dir)
        resume_checkpoint = env.get(settings.RESUME_CHECKPOINT)  # where a resumed run's checkpoint lies
        if resume_checkpoint:
            child_env[settings.RESUME_FROM] = str(output_dir / resume_checkpoint)
        try:
            variation.apply(env, child_env)
            variation.check_clock(env, child_env)
            child_env = canonical_order(child_env)  # what the variation added takes its place too
        except variation.VariationRefused as exc:
            sys.stderr.write(f"reprobox: {exc}\n")
            return 2
        try:
            command = [settings.expand_variables(part, child_env) for part in argv]
        except KeyError as exc:
            sys.stderr.write(f"reprobox: the command uses ${{{exc.args[0]}}}, which is not set\n")
            return 2
        output_dir.mkdir(parents=True, exist_ok=True)
        work = _work_copy(env, child_env, output_dir)
        known = {*work.files, *work.links} if work else set()
        stopwatch = watch.from_environment(env, output_dir, run_dir, known)
        cwd = _start_folder(env, child_env, work.work if work else None)
        started_at = utc_now()
        returncode, ended = _run_job(command, child_env, cwd, stopwatch)
        if work is not None:
            workcopy.prune(work)
        shutil.rmtree(output_dir / settings.RESUME_INPUT, ignore_errors=True)  # an input, not an output
        ended_at = utc_now()  # the job's window: hashing reads what it wrote, it stamps nothing more
        checkpoints, hash_error = _hash_outputs(output_dir)
        watched = ended.run_facts or {}
        pids = list(watched.get("pids") or [])
        facts = runfacts.record(
            env,
            child_env,
            started_at=started_at,
            ended_at=ended_at,
            pids=pids,
            folders=[run_dir, output_dir, cwd, work.work if work else None],
            recorded=readings_merge.merged(run_dir / settings.GUEST_STATE, watched.get("programs")),
        )
        record = dataclasses.replace(
            ended,
            command=command,
            started_at=started_at,
            ended_at=utc_now(),
            run_facts=facts,
            stopped_early=_stopped_early(run_dir),
            environment={
                **determinism.process_environment(seed, det),
                SOURCE_DATE_EPOCH: child_env[SOURCE_DATE_EPOCH],
            },
            checkpoints=checkpoints,
            hash_error=hash_error,
            fingerprint=_fingerprint(run_dir, child_env),
        )
        write_guest_record(run_dir, record)
        return returncode
    finally:
        shutil.rmtree(boot_dir, ignore_errors=True)


def job_environment(
    env: Mapping[str, str], seed: int, det: determinism.Determinism, boot_dir: Path
) -> dict[str, str]:
    """The environment of the user's command: ours for determinism, the startup hook on PYTHONPATH."""
    child = dict(env)
    child.update(determinism.process_environment(seed, det))
    child[settings.HOOK_ACTIVE] = "1"
    if SOURCE_DATE_EPOCH not in _job_file_names(env):  # the job file's own value wins; the host's never
        child[SOURCE_DATE_EPOCH] = DEFAULT_SOURCE_DATE_EPOCH
    existing = env.get("PYTHONPATH")
    child["PYTHONPATH"] = str(boot_dir) + (os.pathsep + existing if existing else "")
    return child


def _job_file_names(env: Mapping[str, str]) -> list[str]:
    """The names the job file's `env:` sets (the controller passes them in order)."""
    try:
        names = json.loads(env.get(settings.ENV_ORDER) or "[]")
    except (ValueError, TypeError):
        return []
    return [str(name) for name in names] if isinstance(names, list) else []


def canonical_order(env: Mapping[str, str]) -> dict[str, str]:
    """The variables sorted by name, then the job file's own in the job file's order.

    Engines do not keep an environment's order (Podman's differs from one start to the next), and a
    job that iterates os.environ (hashing it, saving it) must not see that: its order is fixed here,
    and only the job file decides the order of its own variables (what `--vary env-order` reverses).
    """
    own = [name for name in dict.fromkeys(_job_file_names(env)) if name in env]
    rest = sorted(name for name in env if name not in set(own))
    return {name: env[name] for name in (*rest, *own)}


def _work_copy(
    env: Mapping[str, str], child_env: dict[str, str], output_dir: Path
) -> workcopy.WorkCopy | None:
    """With `workdir: copy`, the job starts in a writable copy of its code in the outputs folder, which
    is then its code folder as it sees it (PWD, REPROBOX_CODE_DIR)."""
    if env.get(settings.WORKDIR) != WORKDIR_COPY:
        return None
    code_dir = Path(env.get(settings.CODE_DIR) or Path.cwd())
    copy = workcopy.make(code_dir, output_dir)
    try:
        links = json.loads(env.get(settings.WORK_LINKS) or "{}")
    except ValueError:
        links = {}
    workcopy.add_links(copy, {str(k): str(v) for k, v in links.items()} if isinstance(links, dict) else {})
    child_env[settings.CODE_DIR] = child_env["PWD"] = str(output_dir)
    return copy


def _start_folder(env: Mapping[str, str], child_env: dict[str, str], work: Path | None) -> Path | None:
    """Where the command starts: the job file's `cwd` inside the code (or its working copy)."""
    relative = env.get(settings.CWD)
    if not relative:
        return work
    top = work or Path(env.get(settings.CODE_DIR) or Path.cwd())
    start = top / relative
    child_env["PWD"] = str(start)
    return start


def _make_boot_dir() -> Path:
    """A private folder holding sitecustomize.py and a link to this reprobox, and nothing else.

    Putting only this folder on PYTHONPATH reaches the job's interpreter even when it is another
    environment, without exposing any other package of ours to it.
    """
    # A fixed name in the run's own fresh TMPDIR, so PYTHONPATH reads the same in every run (jobs save
    # their environment); a random one only where that name is taken (a TMPDIR shared with others).
    boot_dir = Path(tempfile.gettempdir()) / "reprobox-boot"
    try:
        boot_dir.mkdir(mode=0o700)
    except OSError:
        boot_dir = Path(tempfile.mkdtemp(prefix="reprobox-boot-"))
    package_dir = Path(__file__).resolve().parent.parent
    shutil.copyfile(Path(__file__).with_name("_boot") / "sitecustomize.py", boot_dir / "sitecustomize.py")
    (boot_dir / "reprobox").symlink_to(package_dir, target_is_directory=True)
    return boot_dir


def _run_job(
    command: list[str], child_env: dict[str, str], cwd: Path | None, stopwatch: watch.StopWatch | None
) -> tuple[int, GuestRecord]:
    """The command run to its end, watched by `init`'s stop watch where there is one."""

    def on_start(child: subprocess.Popen[bytes]) -> None:
        if stopwatch is not None:
            stopwatch.start(child)

    try:
        return processes.run_command(command, child_env, cwd=cwd, on_start=on_start)
    finally:
        if stopwatch is not None:
            stopwatch.finish()


def _hash_outputs(output_dir: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The checkpoints' hashes, or none and why: a failure here is recorded, not raised."""
    patterns = json.loads(os.environ.get(settings.CHECKPOINTS) or "[]")
    try:
        from reprobox.guest import hashing

        digests = hashing.hash_outputs(output_dir, patterns)
    except Exception as exc:  # noqa: BLE001 - recorded; the controller marks the run failed
        return [], f"{type(exc).__name__}: {exc}"
    return [dict(d.to_json()) for d in digests], None


def _fingerprint(run_dir: Path, job_env: Mapping[str, str]) -> dict[str, Any]:
    """The job's own fingerprint (taken in its process at exit) when it used torch, else ours of the
    machine with the job's environment (its thread counts and variables, not this process's)."""
    state = run_dir / settings.GUEST_STATE
    ranks = sorted(state.glob("fingerprint-rank*.json"))[:MAX_RANK_FILES]
    per_rank: dict[str, dict[str, Any]] = {}
    for path in ranks:  # written by the job's processes: a planted FIFO or garbage is skipped, not fatal
        with contextlib.suppress(OSError, saferead.UnsafeFile):
            data = saferead.read_json(path, FINGERPRINT_LIMIT, root=run_dir)
            if isinstance(data, dict):
                per_rank[path.stem.removeprefix("fingerprint-rank")] = data
    if per_rank:
        first = per_rank.get("0") or next(iter(per_rank.values()))
        if len(per_rank) > 1:
            first = {**first, "ranks": per_rank}
        return dict(first)
    from reprobox.guest import fingerprint

    return dict(fingerprint.collect(environ=job_env))


def _stopped_early(run_dir: Path) -> StoppedEarly | None:
    """Why the step hook ended the job early (a prefix check, or divergence from the reference), if it did."""
    try:  # the job's processes write it: never follow a link, block on a FIFO or read without bound
        data = saferead.read_json(run_dir / settings.GUEST_STATE / STOP_FILE, STOP_FILE_LIMIT, root=run_dir)
    except (OSError, saferead.UnsafeFile):
        return None
    return StoppedEarly.from_json(data)
