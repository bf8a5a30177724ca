"""What a finished run records: the manifest's fields, from the plan, the runtime's outcome and the
guest's own account (`reprobox.records.guest`), with every secret value of the job taken out.

A run is only `succeeded` when the job exited 0, its checkpoints were hashed, and nothing interrupted
it or tampered with reprobox's records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprobox import saferead
from reprobox._version import __version__
from reprobox.claims import ClaimValue, extract_claims
from reprobox.guest import settings
from reprobox.guest.filehash import file_sha256
from reprobox.jobfile import WORKDIR_COPY, redact_env, redact_values
from reprobox.records.guest import GuestRecord
from reprobox.records.manifest import (
    STATUS_CANCELLED,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_SUCCEEDED,
    STDOUT_LOG,
)
from reprobox.records.trail import STOP_MAX_STEPS
from reprobox.runinputs import PreparedRun
from reprobox.runtimes.base import OUTPUTS_SUBDIR, RunOutcome

READ_ONLY_HINT = (
    "; the job tried to write into a read-only folder (its code or data): set `workdir: copy` in the job "
    "file to run it in a writable copy of its code, whose new and changed files are its outputs, or "
    "write outputs under $REPROBOX_OUTPUT_DIR (e.g. Lightning's default_root_dir, HF's output_dir)"
)
LOG_TAIL_FOR_TRACEBACK = 65536  # a torchrun log: every rank's traceback, then the launcher's summary
FIXED_PATHS_NOTE = (
    "the local runtime could not make a private mount namespace here: data sources were linked at "
    "their fixed paths, not mounted read-only"
)


def build_manifest(
    prepared: PreparedRun,
    *,
    runtime_facts: dict[str, Any],
    outcome: RunOutcome,
    guest: GuestRecord | None,
    max_steps: int | None,
    problems: list[str] | None = None,
    resume: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest's fields; the guest's own account of the exit wins over what the runtime saw.

    `problems` are faults found around the run (a record the job tampered with, a log the full disk
    cut short): each one fails the run.
    """
    plan, inputs, job = prepared.plan, prepared.inputs, prepared.job
    exit_code, signal_number = outcome.exit_code, outcome.signal
    if guest is not None and not (outcome.timed_out or outcome.interrupted or outcome.oom_killed):
        exit_code, signal_number = guest.exit_code, guest.signal
    stopped_by_job = (resume or {}).get("stop_at") is not None  # stopped after a step: no final numbers
    claims = [] if stopped_by_job else _claims(prepared, outcome, guest, exit_code)
    problems = [*(problems or []), *(c.error for c in claims if c.error)]
    failure = _failure(
        prepared, outcome, guest, exit_code=exit_code, signal_number=signal_number, problems=problems
    )
    notes: list[str] = []
    if job.data and (outcome.runtime.get("paths") or {}).get("mode") == "fixed":
        notes.append(FIXED_PATHS_NOTE)
    status = STATUS_INTERRUPTED if outcome.interrupted else STATUS_FAILED if failure else STATUS_SUCCEEDED
    if outcome.cancelled:
        status = STATUS_CANCELLED
    recorded = guest or GuestRecord()
    stopped = recorded.stopped_early
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
        "command": recorded.command if recorded.command is not None else list(plan.command),
        "environment": {**redact_env(plan.guest_env, job.secrets), **recorded.environment},
        "runtime": {**runtime_facts, **outcome.runtime},
        "fingerprint": recorded.fingerprint or {},
        "run_facts": recorded.run_facts,
        "checkpoints": recorded.checkpoints,
        "claims": [c.to_json() for c in claims],
        "trail": settings.TRAIL_FILE if (plan.run_dir / settings.TRAIL_FILE).exists() else None,
        # set when only the first --max-steps optimizer steps ran: then the trail is the evidence
        "prefix_check": None
        if max_steps is None
        else {"max_steps": max_steps, "reached": stopped is not None and stopped.reason == STOP_MAX_STEPS},
        "stopped_early": stopped.to_json() if stopped is not None else None,
        "reference_run": str(plan.reference_run) if plan.reference_run else None,
        # set when the run started from a resumable checkpoint or was stopped after a step (long runs)
        "resume": resume,
        "notes": notes,
    }
    redacted: dict[str, Any] = redact_values(manifest, job.secrets)  # the command, paths, notes: anywhere
    return redacted


def _claims(
    prepared: PreparedRun, outcome: RunOutcome, guest: GuestRecord | None, exit_code: int | None
) -> list[ClaimValue]:
    """The job file's claims read from what the run left; none when the job did not finish cleanly
    (its failure is the news, not the numbers it never wrote)."""
    job, run_dir = prepared.job, prepared.plan.run_dir
    finished = exit_code == 0 and guest is not None and not guest.stopped_early
    if not job.claims or not finished or outcome.timed_out or outcome.interrupted or outcome.cancelled:
        return []
    return extract_claims(job.claims, run_dir / OUTPUTS_SUBDIR, run_dir / STDOUT_LOG)


def _failure(
    prepared: PreparedRun,
    outcome: RunOutcome,
    guest: GuestRecord | None,
    *,
    exit_code: int | None,
    signal_number: int | None,
    problems: list[str],
) -> str | None:
    """Why the run failed, in one sentence of clauses; None when it did not."""
    ended = RunOutcome(
        exit_code=exit_code,
        signal=signal_number,
        timed_out=outcome.timed_out,
        interrupted=outcome.interrupted,
        cancelled=outcome.cancelled,
        oom_killed=outcome.oom_killed,
    )
    failure = ended.failure_reason()
    if problems:
        failure = "; ".join([*([failure] if failure else []), *problems])
    if failure is None and guest is None:
        failure = "the guest left no result (guest.json); the run cannot be trusted"
    if failure is None and guest is not None and guest.hash_error:
        failure = f"hashing the checkpoints failed: {guest.hash_error}"
    if outcome.timed_out:
        failure = f"timed out after {prepared.job.timeout:g} s"
    scheduler_failure = (outcome.runtime.get("slurm") or {}).get("failure")
    # the scheduler's own account (PREEMPTED, NODE_FAIL, ...) explains the signal the job died of: it leads
    if scheduler_failure:
        failure = f"{scheduler_failure}; {failure}" if failure else scheduler_failure
    if failure and exit_code not in (None, 0) and not outcome.timed_out:
        hint = _nondeterministic_op(prepared, outcome)
        if hint:
            failure += f"; {hint}"
    if failure and _wrote_into_read_only(prepared.plan.run_dir):
        failure += READ_ONLY_HINT
    return failure


def _nondeterministic_op(prepared: PreparedRun, outcome: RunOutcome) -> str | None:
    """The op without a deterministic kernel the job's log ends in, with its line and fix; else None."""
    run_dir = prepared.plan.run_dir
    try:
        tail = saferead.read_tail(run_dir / STDOUT_LOG, LOG_TAIL_FOR_TRACEBACK, root=run_dir)
    except (OSError, saferead.UnsafeFile):  # gone, or replaced by the job with something else
        return None
    text = tail.decode("utf-8", errors="replace")
    if len(tail) == LOG_TAIL_FOR_TRACEBACK:
        text = text.partition("\n")[2]  # the first line is cut
    # where the job saw its code (every runtime records it), then the snapshot and the folder it came from
    paths = outcome.runtime.get("paths")
    paths = paths if isinstance(paths, dict) else {}
    # with `workdir: copy` the job ran its code from a copy in its outputs folder
    working = paths.get("outputs") if prepared.job.workdir == WORKDIR_COPY else None
    code_dirs = [str(d) for d in (working, paths.get("code"), prepared.plan.job.code, prepared.job.code) if d]
    from reprobox.nondeterministic_ops import explain_nondeterministic_op  # a failed run's only: its table

    return explain_nondeterministic_op(
        text,
        code_dirs,
        job_file=prepared.job.job_file.name,
        # warn_only in the job file only warns: an error then came from the job's own call
        set_by_job_file=prepared.job.determinism.algorithms and not prepared.job.determinism.warn_only,
    )


def _wrote_into_read_only(run_dir: Path) -> bool:
    """Whether the job's log ends in a write refused by the read-only code or data mounts."""
    try:
        tail = saferead.read_tail(run_dir / STDOUT_LOG, 16384, root=run_dir)
    except (OSError, saferead.UnsafeFile):  # gone, or replaced by the job with something else
        return False
    return b"Read-only file system" in tail
