"""One run, start to finish: run dir -> plan -> runtime -> guest's result -> manifest.json.

Whatever happens to the job, a manifest is written (its fields are assembled in `reprobox.recording`),
and a run is only `succeeded` when the job exited 0, its checkpoints were hashed, and nothing
interrupted it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from reprobox import codetree, progress
from reprobox.errors import Interrupted, ReproboxError, UsageError
from reprobox.guest import settings
from reprobox.jobfile import WORKDIR_COPY, JobSpec, checkpoint_globs
from reprobox.recording import build_manifest
from reprobox.records.manifest import (
    STATUS_CANCELLED,
    STATUS_INTERRUPTED,
    RunRecord,
    rewrite_record,
)
from reprobox.runfolder import RunFolder, unbegun_removed
from reprobox.runinputs import PreparedRun, RunInputs
from reprobox.runprogress import watching
from reprobox.runtimes.base import OUTPUTS_SUBDIR, RunOutcome, RunPlan, Runtime, Variation
from reprobox.runtimes.launcher import launch_command
from reprobox.timestamps import utc_now


class StartPlan(Protocol):
    """How a run starts or stops other than as the job does on its own (resumed from a checkpoint,
    stopped after a step), as its caller planned it (`reprobox.resume.start.ResumePlan`)."""

    def arguments(self, job: JobSpec) -> tuple[str, ...]:
        """What is appended to the job's command."""
        ...

    def environment(self, job: JobSpec) -> dict[str, str]:
        """The variables the guest (and the job) resume and stop by."""
        ...

    def place(self, outputs: Path) -> None:
        """Put what the run starts from into its new outputs folder (raises when it is not as recorded)."""
        ...

    def to_json(self) -> dict[str, Any]:
        """What the manifest says of it (`resume`)."""
        ...


@dataclass(frozen=True)
class RunOptions:
    """Per-invocation settings that are not part of the job file."""

    runs_dir: Path = Path("runs")
    echo: Callable[[bytes], None] | None = None  # live job output (the CLI passes the terminal)
    max_steps: int | None = None
    reference_run: Path | None = None  # stop as soon as this run's trail diverges from this run's
    audit: bool = False  # record nondeterministic-op warnings (reprobox audit)
    extra_env: dict[str, str] = field(default_factory=dict)
    variation: Variation = field(default_factory=Variation)  # verify --vary: what this run changes
    start: StartPlan | None = None  # start from a checkpoint, stop after a step (a resumed run, a segment)


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
            settings.CHECKPOINTS: json.dumps(list(checkpoint_globs(job))),
            settings.ENV_ORDER: json.dumps(list(job.env)),
        }
    )
    if job.cwd:
        env[settings.CWD] = job.cwd
    if job.workdir == WORKDIR_COPY:
        env[settings.WORKDIR] = WORKDIR_COPY
        links = work_links(job)
        if links:
            env[settings.WORK_LINKS] = json.dumps(links, sort_keys=True)
    if job.trail is not None:
        env[settings.TRAIL_EVERY] = str(job.trail.every)
    if options.max_steps is not None:
        env[settings.MAX_STEPS] = str(options.max_steps)
    if options.audit:
        env[settings.AUDIT] = "1"
    if job.resume is not None and job.trail is not None:  # every run: any of them may be resumed from
        env[settings.TRAIL_STATE] = "1"
    if options.start is not None:
        env.update(options.start.environment(job))
    env.update(options.extra_env)
    return env


def work_links(job: JobSpec) -> dict[str, str]:
    """Data kept inside the code folder (and so no code: git ignores it), linked into the working copy
    where the job reads it by a relative path: {its path in the code folder: its data target}. Each
    runtime turns the target into the path the job sees the data at."""
    code = job.code.resolve()
    links = {}
    for mount in job.data:
        source = mount.source.resolve()
        if source != code and code in source.parents:
            links[source.relative_to(code).as_posix()] = mount.target
    return links


def execute(
    job: JobSpec,
    runtime: Runtime,
    options: RunOptions,
    *,
    stop: threading.Event | None = None,
    inputs: RunInputs | None = None,
    label: progress.RunLabel | None = None,
) -> RunRecord:
    """Run the job once and write its manifest; raises Interrupted after recording a Ctrl-C (one before
    the run began leaves no folder)."""
    with unbegun_removed():
        return finish(prepare(job, options, inputs), runtime, options, stop=stop, label=label)


def prepare_inputs(job: JobSpec, options: RunOptions) -> RunInputs:
    """Snapshot the code (runs/<job>/.code/<tree digest>/) and digest the data sources."""
    store = options.runs_dir / job.name / codetree.SNAPSHOTS_DIR
    code = codetree.snapshot_code(job.code, store, exclude=(options.runs_dir,))
    return RunInputs(code=code, data=codetree.digest_data(job.data))


def prepare(job: JobSpec, options: RunOptions, inputs: RunInputs | None = None) -> PreparedRun:
    if inputs is None:
        inputs = prepare_inputs(job, options)
    folder = RunFolder.make(
        options.runs_dir, job.name
    )  # with room for the records, should the job fill the disk
    try:
        plan = _plan(job, options, inputs, folder.run_id, folder.path)
        if options.start is not None:
            options.start.place(folder.path / OUTPUTS_SUBDIR)
    except BaseException:
        folder.discard()
        raise
    return PreparedRun(plan, inputs, job)


def _plan(job: JobSpec, options: RunOptions, inputs: RunInputs, run_id: str, run_dir: Path) -> RunPlan:
    return RunPlan(
        job=job.with_overrides(code=inputs.code.path),
        run_id=run_id,
        run_dir=run_dir,
        guest_env=guest_env(job, run_id, options),
        command=launch_command(
            job.with_overrides(command=job.command + (options.start.arguments(job) if options.start else ()))
        ),
        timeout=job.timeout,
        reference_run=options.reference_run,
        variation=options.variation,
    )


def finish(
    prepared: PreparedRun,
    runtime: Runtime,
    options: RunOptions,
    *,
    stop: threading.Event | None = None,
    label: progress.RunLabel | None = None,
) -> RunRecord:
    """Run a prepared run to its end and record it, whatever the end was; one that met a full disk is
    recorded as failed for it, then raises DiskFull. The run's start, trail steps and end go to the
    progress reporter, under `label` ("run 2/3") where the caller numbers its runs."""
    plan = prepared.plan
    folder = RunFolder(plan.run_dir)
    unable: ReproboxError | None = None  # why the runtime could not run the job
    with watching(progress.RunSeen(prepared.job.name, plan.run_dir, label)) as watched, folder.running():
        try:
            folder.begin()
            with folder.job_log(options.echo) as log:
                outcome = runtime.run(plan, log, stop)
        except KeyboardInterrupt:  # a signal before the runtime could take it: the job never started
            outcome = RunOutcome(interrupted=True, started_at=utc_now(), ended_at=utc_now())
        except UsageError:  # a plan this runtime refuses before starting anything: bad input leaves nothing
            folder.discard()
            raise
        except ReproboxError as exc:  # an engine gone, no GPU free: recorded as failed, then raised
            unable, outcome = exc, RunOutcome(started_at=utc_now(), ended_at=utc_now())
        try:
            record = _record(prepared, folder, runtime, options, outcome, unable=unable)
        except KeyboardInterrupt:  # a signal while recording: record it again, now as interrupted
            outcome.interrupted = True
            record = _record(prepared, folder, runtime, options, outcome, unable=unable)
        watched.status = record.status
    folder.point_latest()
    if outcome.interrupted:
        raise Interrupted(plan.run_dir)
    if unable is not None:
        raise unable
    folder.check()
    return record


def _record(
    prepared: PreparedRun,
    folder: RunFolder,
    runtime: Runtime,
    options: RunOptions,
    outcome: RunOutcome,
    *,
    unable: ReproboxError | None,
) -> RunRecord:
    """The run's manifest, written atomically, from what the runtime and the guest left."""
    guest = folder.guest_record(prepared.plan.job.secrets)
    problems = folder.problems(guest)
    if unable is not None:
        problems.append(f"the {runtime.name} runtime could not run it: {unable.message}")
    try:
        runtime_facts = runtime.describe()
    except ReproboxError as exc:  # the engine that could not run the job cannot describe itself either
        runtime_facts = {"name": runtime.name, "unavailable": exc.message}
    data = build_manifest(
        prepared,
        runtime_facts=runtime_facts,
        outcome=outcome,
        guest=guest.record,
        max_steps=options.max_steps,
        problems=problems,
        resume=options.start.to_json() if options.start is not None else None,
    )
    return folder.write_manifest(data)


def mark_interrupted(record: RunRecord) -> RunRecord:
    """A run stopped because the user interrupted a verify of several runs: recorded as interrupted,
    not as cancelled (which says the verdict was already known)."""
    if record.status != STATUS_CANCELLED:
        return record
    failure = RunOutcome(interrupted=True).failure_reason()
    return rewrite_record(record, status=STATUS_INTERRUPTED, failure=failure)


def runs_dir_default() -> Path:
    return Path(os.environ.get("REPROBOX_RUNS_DIR", "runs"))
