"""One run, start to finish: run dir -> plan -> runtime -> guest's result -> manifest.json.

Whatever happens to the job, a manifest is written, and a run is only `succeeded` when the job exited
0, its checkpoints were hashed, and nothing interrupted it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from reprobox import codetree, controller, saferead
from reprobox._version import __version__
from reprobox.errors import Interrupted
from reprobox.guest import settings
from reprobox.guest.filehash import file_sha256
from reprobox.jobfile import JobSpec, redact_env, redact_values
from reprobox.records.guest import GuestResult, read_guest_result
from reprobox.records.manifest import (
    STATUS_CANCELLED,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_SUCCEEDED,
    STDOUT_LOG,
    RunRecord,
    move_aside_planted,
    write_json_atomic,
    write_record,
)
from reprobox.runtimes.base import OUTPUTS_SUBDIR, RunOutcome, RunPlan, Runtime
from reprobox.runtimes.launcher import launch_command


@dataclass(frozen=True)
class RunOptions:
    """Per-invocation settings that are not part of the job file."""

    runs_dir: Path = Path("runs")
    echo: Callable[[bytes], None] | None = None  # live job output (the CLI passes the terminal)
    max_steps: int | None = None
    reference_run: Path | None = None  # stop as soon as this run's trail diverges from this run's
    audit: bool = False  # record nondeterministic-op warnings (reprobox audit)
    extra_env: dict[str, str] = field(default_factory=dict)


class _TeeSink:
    """Writes the job's output to stdout.log and, live, to the terminal.

    It never raises: a log that cannot be written (a full disk) is given up and `lost` says why, and
    the output keeps flowing, so that the runtime keeps draining the job's pipe and the job never blocks.
    """

    def __init__(self, log: IO[bytes], echo: Callable[[bytes], None] | None) -> None:
        self.log = log
        self.echo = echo
        self.lost: str | None = None

    def write(self, chunk: bytes) -> None:
        if self.lost is None:
            try:
                self.log.write(chunk)
                self.log.flush()
            except OSError as exc:
                self.lost = exc.strerror or str(exc)
        if self.echo is not None:
            try:
                self.echo(chunk)
            except OSError:  # the terminal went away (a closed pipe): the log still has the output
                self.echo = None


def new_run_id() -> str:
    """Sortable by start time, unique across concurrent runs."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}Z-{secrets.token_hex(3)}"


def make_run_dir(runs_dir: Path, job_name: str) -> tuple[str, Path]:
    parent = runs_dir / job_name
    parent.mkdir(parents=True, exist_ok=True)
    while True:
        run_id = new_run_id()
        run_dir = parent / run_id
        try:
            run_dir.mkdir()
        except FileExistsError:
            continue
        (run_dir / OUTPUTS_SUBDIR).mkdir()
        controller.claim(run_dir)  # whose run it is, for `reprobox clean`
        return run_id, run_dir.resolve()


LATEST = "latest"


def point_latest(run_dir: Path) -> None:
    """Make runs/<job>/latest point at this run (atomically), for scripts and `compare .../latest`."""
    link = run_dir.parent / LATEST
    tmp = run_dir.parent / f".{LATEST}.{secrets.token_hex(4)}"
    tmp.symlink_to(run_dir.name, target_is_directory=True)
    tmp.replace(link)


def list_runs(runs_dir: Path, job_name: str) -> list[Path]:
    """A job's run directories, oldest first (run ids sort by start time); the `latest` link is skipped."""
    parent = runs_dir / job_name
    if not parent.is_dir():
        return []
    return sorted(
        p for p in parent.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
    )


def guest_env(job: JobSpec, run_id: str, options: RunOptions) -> dict[str, str]:
    """Settings the guest reads, plus the job's own variables."""
    env = dict(job.env)
    env.update(
        {
            settings.SEED: str(job.seed),
            settings.RUN_ID: run_id,
            settings.DETERMINISM: json.dumps(asdict(job.determinism), sort_keys=True),
            settings.CHECKPOINTS: json.dumps(list(job.checkpoints)),
        }
    )
    if job.trail is not None:
        env[settings.TRAIL_EVERY] = str(job.trail.every)
    if options.max_steps is not None:
        env[settings.MAX_STEPS] = str(options.max_steps)
    if options.audit:
        env[settings.AUDIT] = "1"
    env.update(options.extra_env)
    return env


def execute(
    job: JobSpec,
    runtime: Runtime,
    options: RunOptions,
    *,
    stop: threading.Event | None = None,
    inputs: RunInputs | None = None,
) -> RunRecord:
    """Run the job once and write its manifest; raises Interrupted after recording a Ctrl-C."""
    return finish(prepare(job, options, inputs), runtime, options, stop=stop)


@dataclass(frozen=True)
class RunInputs:
    """What runs start from: the code's snapshot and the data's digests, made once for all runs of a
    verify, so that an edit in the code folder while it runs changes nothing and data is read once."""

    code: codetree.CodeSnapshot
    data: tuple[codetree.DataDigest, ...]


def prepare_inputs(job: JobSpec, options: RunOptions) -> RunInputs:
    """Snapshot the code (runs/<job>/.code/<tree digest>/) and digest the data sources."""
    store = options.runs_dir / job.name / codetree.SNAPSHOTS_DIR
    code = codetree.snapshot_code(job.code, store, exclude=(options.runs_dir,))
    return RunInputs(code=code, data=codetree.digest_data(job.data))


@dataclass(frozen=True)
class PreparedRun:
    """A run whose directory exists and whose inputs are digested, ready for a runtime.

    `job` is the job as written; `plan.job` is the same job with the code snapshot as its code folder.
    """

    plan: RunPlan
    inputs: RunInputs
    job: JobSpec


def prepare(job: JobSpec, options: RunOptions, inputs: RunInputs | None = None) -> PreparedRun:
    if inputs is None:
        inputs = prepare_inputs(job, options)
    run_id, run_dir = make_run_dir(options.runs_dir, job.name)
    plan = RunPlan(
        job=job.with_overrides(code=inputs.code.path),
        run_id=run_id,
        run_dir=run_dir,
        guest_env=guest_env(job, run_id, options),
        command=launch_command(job),
        timeout=job.timeout,
        reference_run=options.reference_run,
    )
    return PreparedRun(plan, inputs, job)


def finish(
    prepared: PreparedRun, runtime: Runtime, options: RunOptions, *, stop: threading.Event | None = None
) -> RunRecord:
    """Run a prepared run to its end and record it, whatever the end was."""
    plan = prepared.plan
    with (plan.run_dir / STDOUT_LOG).open("wb") as log:
        sink = _TeeSink(log, options.echo)
        outcome = runtime.run(plan, sink, stop)
    guest = _read_guest_result(plan.run_dir)
    if guest.data is not None and plan.job.secrets:  # it holds the expanded command: no secret stays in it
        _redact_guest_record(plan.run_dir, guest.data, plan.job.secrets)
    problems = [p for p in (guest.problem, move_aside_planted(plan.run_dir)) if p]
    if sink.lost is not None:
        problems.append(f"{STDOUT_LOG} could not be written ({sink.lost}) and is incomplete")
    data = build_manifest(
        prepared,
        runtime_facts=runtime.describe(),
        outcome=outcome,
        guest=guest.data,
        options=options,
        problems=problems,
    )
    record = write_record(plan.run_dir, data)
    point_latest(plan.run_dir)
    if outcome.interrupted:
        raise Interrupted(plan.run_dir)
    return record


def mark_interrupted(record: RunRecord) -> RunRecord:
    """A run stopped because the user interrupted a verify of several runs: recorded as interrupted,
    not as cancelled (which says the verdict was already known)."""
    if record.status != STATUS_CANCELLED:
        return record
    data = {
        **record.data,
        "status": STATUS_INTERRUPTED,
        "failure": RunOutcome(interrupted=True).failure_reason(),
    }
    data.pop("schema", None)
    return write_record(record.run_dir, data)


def _redact_guest_record(run_dir: Path, data: dict[str, Any], hidden: tuple[str, ...]) -> None:
    """Rewrite the guest's record with secret values replaced, so a published run dir holds none."""
    path = run_dir / settings.GUEST_STATE / settings.GUEST_RESULT
    redacted = redact_values(data, hidden)
    if redacted != data:
        with contextlib.suppress(OSError):
            write_json_atomic(path, redacted)


def build_manifest(
    prepared: PreparedRun,
    *,
    runtime_facts: dict[str, Any],
    outcome: RunOutcome,
    guest: dict[str, Any] | None,
    options: RunOptions,
    problems: list[str] | None = None,
) -> dict[str, Any]:
    """The manifest's fields; the guest's own account of the exit wins over what the runtime saw.

    `problems` are faults found around the run (a record the job tampered with, a log the full disk
    cut short): each one fails the run.
    """
    plan, inputs, job = prepared.plan, prepared.inputs, prepared.job
    exit_code, signal_number = outcome.exit_code, outcome.signal
    if guest is not None and not (outcome.timed_out or outcome.interrupted or outcome.oom_killed):
        exit_code, signal_number = guest.get("exit_code"), guest.get("signal")
    ended = RunOutcome(
        exit_code=exit_code,
        signal=signal_number,
        timed_out=outcome.timed_out,
        interrupted=outcome.interrupted,
        cancelled=outcome.cancelled,
        oom_killed=outcome.oom_killed,
    )
    failure = ended.failure_reason()
    notes: list[str] = []
    if problems:
        failure = "; ".join([*([failure] if failure else []), *problems])
    if failure is None and guest is None:
        failure = "the guest left no result (guest.json); the run cannot be trusted"
    if failure is None and guest is not None and guest.get("hash_error"):
        failure = f"hashing the checkpoints failed: {guest['hash_error']}"
    if outcome.timed_out:
        failure = f"timed out after {job.timeout:g} s"
    scheduler_failure = (outcome.runtime.get("slurm") or {}).get("failure")
    if scheduler_failure:  # the scheduler's own account (PREEMPTED, NODE_FAIL, ...) says more than a signal
        failure = f"{failure}; {scheduler_failure}" if failure else scheduler_failure
    if job.data and (outcome.runtime.get("paths") or {}).get("mode") == "fixed":
        notes.append(
            "the local runtime could not make a private mount namespace here: data sources were linked at "
            "their fixed paths, not mounted read-only"
        )
    if failure and _wrote_into_read_only(plan.run_dir):
        failure += (
            "; the job tried to write into a read-only folder (its code or data): write outputs under "
            "$REPROBOX_OUTPUT_DIR (e.g. Lightning's default_root_dir, HF's output_dir, a work_dir flag)"
        )
    status = STATUS_INTERRUPTED if outcome.interrupted else STATUS_FAILED if failure else STATUS_SUCCEEDED
    if outcome.cancelled:
        status = STATUS_CANCELLED
    guest = guest or {}
    environment = {**redact_env(plan.guest_env, job.secrets), **guest.get("environment", {})}
    manifest = {
        "run_id": plan.run_id,
        "job_name": job.name,
        "status": status,
        "failure": failure,
        "exit_code": exit_code,
        "signal": signal_number,
        "timed_out": outcome.timed_out,
        "oom_killed": outcome.oom_killed,
        "started_at": outcome.started_at,
        "ended_at": outcome.ended_at,
        "reprobox_version": __version__,
        "job": job.to_json(),
        "job_file": str(job.job_file),
        "job_file_sha256": file_sha256(job.job_file),
        "code": inputs.code.manifest_entry(),
        "data": [d.to_json() for d in inputs.data],
        "seed": job.seed,
        "command": guest.get("command", list(plan.command)),
        "environment": environment,
        "runtime": {**runtime_facts, **outcome.runtime},
        "fingerprint": guest.get("fingerprint", {}),
        "checkpoints": guest.get("checkpoints", []),
        "trail": settings.TRAIL_FILE if (plan.run_dir / settings.TRAIL_FILE).exists() else None,
        "prefix_check": _prefix_check(guest, options),
        "stopped_early": guest.get("stopped_early"),
        "reference_run": str(plan.reference_run) if plan.reference_run else None,
        "notes": notes,
    }
    redacted: dict[str, Any] = redact_values(manifest, job.secrets)  # the command, paths, notes: anywhere
    return redacted


def _wrote_into_read_only(run_dir: Path) -> bool:
    """Whether the job's log ends in a write refused by the read-only code or data mounts."""
    try:
        tail = saferead.read_tail(run_dir / STDOUT_LOG, 16384, root=run_dir)
    except (OSError, saferead.UnsafeFile):  # gone, or replaced by the job with something else
        return False
    return b"Read-only file system" in tail


def _prefix_check(guest: dict[str, Any] | None, options: RunOptions) -> dict[str, Any] | None:
    """Set when only the first --max-steps optimizer steps ran: then the trail is the evidence."""
    if options.max_steps is None:
        return None
    stopped = (guest or {}).get("stopped_early") or {}
    return {"max_steps": options.max_steps, "reached": stopped.get("reason") == "max_steps"}


def _read_guest_result(run_dir: Path) -> GuestResult:
    """The guest's record, read as a file the job could have replaced (see reprobox.records.guest)."""
    return read_guest_result(run_dir)


def runs_dir_default() -> Path:
    return Path(os.environ.get("REPROBOX_RUNS_DIR", "runs"))
