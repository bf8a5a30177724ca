"""Run a job N times and decide whether its checkpoints are bit-identical every time.

The inputs are fixed once before the first run: the code folder is copied into a read-only snapshot
that every run runs from, and the data sources are hashed (see `runner.prepare_inputs`). Runs go one
after another; the first is the reference. A failed run ends verification (there is no
verdict on a job that does not finish); by default so does the first differing run.

With `stop_on_divergence` the runs start together instead: each rerun's step hook checks its trail
against the reference's as both grow, a rerun that diverges stops at that step, and the others are
stopped as soon as it says so (`runstops`); the verdict comes as soon as the first differing step is
known.
"""

from __future__ import annotations

import contextlib
import contextvars
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace

from reprobox import progress
from reprobox.compare import DIFFERENT, FAILED, Comparison, compare_runs
from reprobox.errors import Interrupted, UsageError
from reprobox.jobfile import JobSpec, Trail
from reprobox.records.manifest import RunRecord, read_record
from reprobox.records.trail import STOP_DIVERGED, STOP_MAX_STEPS
from reprobox.runfolder import unbegun_removed
from reprobox.runinputs import RunInputs
from reprobox.runner import (
    RunOptions,
    execute,
    finish,
    mark_interrupted,
    prepare,
    prepare_inputs,
)
from reprobox.runstops import RunStops
from reprobox.runtimes.base import Runtime

MAX_RUNS = 100  # each run is a full training job and a run directory; more is a typo, not a plan


@dataclass(frozen=True)
class VerifyOptions:
    runs: int = 2
    keep_going: bool = False  # run all N even after a difference
    stop_on_divergence: bool = False  # check each rerun's trail against the reference while it runs
    parallel: int = 1  # runs side by side (on a cluster runtime, on different nodes)
    tensor_details: bool = True
    what: str = "run"  # what the runs are called while they run: "run 2/3", "drill-down replay 1/2"


def verify(
    job: JobSpec,
    runtime: Runtime,
    run_options: RunOptions,
    options: VerifyOptions,
    *,
    inputs: RunInputs | None = None,
) -> tuple[Comparison, list[RunRecord]]:
    """Run the job `options.runs` times (reporting each run to the current progress reporter) and compare.

    `inputs` (a code snapshot and data digests made once) lets several verifies of one job share them.
    """
    check_counts(options)
    inputs = inputs or prepare_inputs(job, run_options)
    progress.say(_inputs_text(inputs))
    if options.stop_on_divergence or options.parallel > 1:
        with unbegun_removed():  # a signal before the pool starts a prepared run leaves no folder of it
            return _verify_together(job, runtime, run_options, options, inputs=inputs)
    records: list[RunRecord] = []
    comparison: Comparison | None = None
    series = progress.Series(options.runs, options.what)
    for index in range(options.runs):
        progress.say(f"run {index + 1}/{options.runs} of {job.name} ({runtime.name})")
        record = execute(job, runtime, run_options, inputs=inputs, label=series.label(index + 1))
        records.append(record)
        progress.say(
            f"run {index + 1}/{options.runs}: {record.status}"
            + (f" ({record.failure})" if record.failure else "")
        )
        if len(records) == 1 and not record.succeeded:
            break
        if len(records) > 1:
            comparison = compare_runs(records, tensor_details=options.tensor_details)
            if comparison.verdict == FAILED or (comparison.verdict == DIFFERENT and not options.keep_going):
                break
    if comparison is None:
        comparison = compare_runs(records, tensor_details=options.tensor_details)
    return comparison, records


def check_counts(options: VerifyOptions) -> None:
    """Refuse run counts that compare nothing or would fill the disk, before anything is made."""
    if not 2 <= options.runs <= MAX_RUNS:
        raise UsageError(f"--runs must be from 2 to {MAX_RUNS}, not {options.runs}; e.g. --runs 3")
    if options.parallel < 1:
        raise UsageError(f"--parallel must be at least 1, not {options.parallel}")


def _inputs_text(inputs: RunInputs) -> str:
    """One line on what every run will run: the code's digest and git state, and the data."""
    tree = inputs.code.tree
    git = tree.git
    where = (
        f", git {git.commit[:12] if git.commit else 'no commit'}{' + changes' if git.dirty else ''}"
        if git
        else ""
    )
    data = f"; {len(inputs.data)} data source(s) hashed" if inputs.data else ""
    return (
        f"code {tree.digest[:12]} ({len(tree.files)} files{where}): every run runs {inputs.code.path}{data}"
    )


def _verify_together(
    job: JobSpec,
    runtime: Runtime,
    run_options: RunOptions,
    options: VerifyOptions,
    *,
    inputs: RunInputs,
) -> tuple[Comparison, list[RunRecord]]:
    """Runs side by side; with stop_on_divergence, reruns check their trail against the reference's live."""
    live = options.stop_on_divergence
    if live and job.trail is None:
        job = job.with_overrides(trail=Trail(every=1))
    quiet = replace(
        run_options, echo=None
    )  # interleaved output of parallel runs helps nobody: see stdout.log
    reference = prepare(job, quiet, inputs)  # first: reruns compare against its directory
    rerun_options = replace(quiet, reference_run=reference.plan.run_dir) if live else quiet
    workers = options.runs if live else max(1, min(options.parallel, options.runs))
    how = "each checked step by step against the first" if live else f"{workers} at a time"
    progress.say(f"{options.runs} runs of {job.name} side by side ({runtime.name}), {how}")
    stops = RunStops()
    series = progress.Series(options.runs, options.what)

    def start(index: int) -> RunRecord | None:
        """A rerun's directory is made when it starts, and not at all once the verdict is known."""
        label = series.label(index + 1)
        if index == 0:
            record = finish(reference, runtime, quiet, stop=stops.event(index), label=label)
        elif stops.closed.is_set():
            return None
        else:
            prepared = prepare(job, rerun_options, inputs)
            stops.watch(index, prepared.plan.run_dir)
            record = finish(prepared, runtime, quiet, stop=stops.event(index), label=label)
        if _ends_verification(record):
            stops.stop()  # here, not when the main thread hears of it: no further run may start
        return record

    records: dict[int, RunRecord] = {}
    interrupted = False
    with (
        stops.watching_divergence() if live else contextlib.nullcontext(),
        ThreadPoolExecutor(max_workers=workers) as pool,
    ):
        # Each run in a copy of this context, so that what the runtime reports reaches the same reporter.
        futures = {
            pool.submit(contextvars.copy_context().run, start, index): index for index in range(options.runs)
        }
        try:
            for future in as_completed(futures):
                record = future.result()
                if record is None:
                    continue
                records[futures[future]] = record
                progress.say(
                    f"run {futures[future] + 1}/{options.runs}: {record.status}" + _stop_text(record)
                )
                if _ends_verification(record):
                    stops.stop()  # the verdict is known: stop the others
        except KeyboardInterrupt:
            interrupted = True
            stops.interrupt()
            for future, index in futures.items():
                late = _result_after_interrupt(future)
                if late is not None:
                    records.setdefault(index, mark_interrupted(late))
    if interrupted:
        raise Interrupted(reference.plan.run_dir)
    ordered = [records[i] for i in sorted(records)]
    return compare_runs(ordered, tensor_details=options.tensor_details), ordered


def _result_after_interrupt(future: Future[RunRecord | None]) -> RunRecord | None:
    """A run's record once the interrupt has stopped it; a run that raised Interrupted itself (its own
    thread saw the signal) has recorded itself already."""
    try:
        return future.result()
    except Interrupted as exc:
        return read_record(exc.run_dir) if exc.run_dir is not None else None


def _ends_verification(record: RunRecord) -> bool:
    """A failed or diverged run decides the verdict; the runs still to come would change nothing."""
    stopped = record.stopped_early
    return (stopped is not None and stopped.reason == STOP_DIVERGED) or not record.succeeded


def _stop_text(record: RunRecord) -> str:
    stopped = record.stopped_early
    if stopped is not None and stopped.reason == STOP_DIVERGED:
        return f" (diverged from the reference at optimizer step {stopped.step})"
    if stopped is not None and stopped.reason == STOP_MAX_STEPS:
        return f" (stopped after {stopped.step} optimizer steps)"
    return ""
