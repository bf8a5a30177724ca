"""`verify --resume-at K`: is resuming from the step-K checkpoint exact?

Three runs of one code snapshot: the job stopped after step K through its own `resume.stop` (its
checkpoint of step K saved), the job resumed from that checkpoint alone, and the job uninterrupted. The
resumed and the uninterrupted run must then leave the same checkpoints after step K and the same final
outputs (files only one of them wrote, such as a log begun anew, are named and left out). Their
trails (forced on) digest every RNG stream, optimizer and scheduler at each step, so a resume that is not
exact is explained by the state its checkpoint fails to restore.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from reprobox import progress, trails
from reprobox.compare import DIFFERENT, FAILED, IDENTICAL, Comparison, compare_runs
from reprobox.errors import UsageError
from reprobox.jobfile import JobSpec, Trail
from reprobox.records.manifest import RunRecord
from reprobox.resume.checkpoints import recorded_checkpoints
from reprobox.resume.start import ResumeFrom, ResumePlan
from reprobox.resume.state import describe_state
from reprobox.runinputs import RunInputs
from reprobox.runner import RunOptions, execute, mark_interrupted, prepare_inputs
from reprobox.runtimes.base import Runtime


@dataclass
class ResumeCheck:
    """The verdict on one resume: the comparison after step `at`, and why it is not exact if it is not."""

    at: int
    comparison: Comparison
    stopped: RunRecord
    resumed: RunRecord | None = None
    uninterrupted: RunRecord | None = None
    optimizer_step: int | None = None  # optimizer steps made by step `at` (the job may count otherwise)
    first_step: int | None = None  # the first optimizer step after the resume whose parameters differ
    state: list[str] = field(default_factory=list)  # state keys that differ after the resume
    state_step: int | None = None
    sentence: str = ""

    @property
    def exact(self) -> bool:
        return self.comparison.verdict == IDENTICAL

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "exact": self.exact,
            "sentence": self.sentence,
            "stopped_run": str(self.stopped.run_dir),
            "resumed_run": str(self.resumed.run_dir) if self.resumed else None,
            "uninterrupted_run": str(self.uninterrupted.run_dir) if self.uninterrupted else None,
            "optimizer_step": self.optimizer_step,
            "first_differing_step": self.first_step,
            "state_differs": [{"key": key, **describe_state(key)} for key in self.state],
            "state_step": self.state_step,
        }


def require_resume(job: JobSpec) -> None:
    if job.resume is None:
        raise UsageError(
            f"{job.job_file}: the job has no 'resume:' section; add one saying where the job saves "
            "resumable checkpoints and how it resumes and stops (docs/long-runs.md)"
        )


def verify_resume(
    job: JobSpec,
    runtime: Runtime,
    run_options: RunOptions,
    at: int,
    *,
    parallel: int = 1,
    inputs: RunInputs | None = None,
) -> ResumeCheck:
    """Stop after `at`, resume, run uninterrupted (beside the other two with parallel > 1), compare."""
    require_resume(job)
    if at < 1:
        raise UsageError(f"--resume-at must be a step of at least 1, not {at}")
    job = job.with_overrides(trail=job.trail or Trail(every=1))  # the state digests explain a difference
    inputs = inputs or prepare_inputs(job, run_options)
    quiet = replace(run_options, echo=None) if parallel > 1 else run_options
    stop = threading.Event()  # ends the uninterrupted run early when there will be no verdict
    with ThreadPoolExecutor(max_workers=1) as pool:
        uninterrupted: Future[RunRecord] | None = None
        if parallel > 1:
            progress.say(f"the uninterrupted run of {job.name} starts beside the stopped and resumed runs")
            uninterrupted = _submit(pool, lambda: execute(job, runtime, quiet, inputs=inputs, stop=stop))
        try:
            stopped, start, resumed = _stop_and_resume(job, runtime, quiet, at, inputs)
            if start is None or resumed is None:
                stop.set()
                return _failed(at, stopped, f"the run stopped after step {at} failed: {stopped.failure}")
            if uninterrupted is None:
                progress.say(f"running {job.name} uninterrupted")
                whole = execute(job, runtime, quiet, inputs=inputs)
            else:
                whole = uninterrupted.result()
        except BaseException:
            stop.set()  # Ctrl-C, or bad input found on the way: the run beside is stopped, not awaited
            if uninterrupted is not None:
                with contextlib.suppress(BaseException):
                    mark_interrupted(uninterrupted.result())
            raise
    return judge(at, stopped, resumed, whole, optimizer_step=start.optimizer_step)


def _stop_and_resume(
    job: JobSpec, runtime: Runtime, options: RunOptions, at: int, inputs: RunInputs
) -> tuple[RunRecord, ResumeFrom | None, RunRecord | None]:
    """The run stopped after `at`, its checkpoint there, and the run resumed from it (None when the
    stopped run failed)."""
    progress.say(f"stopping {job.name} after step {at} ({runtime.name})")
    stopped = execute(job, runtime, replace(options, start=ResumePlan(stop_at=at)), inputs=inputs)
    progress.say(f"stopped run: {_status(stopped)}")
    if not stopped.succeeded:
        return stopped, None, None
    start = _start_of(stopped, at)
    progress.say(f"resuming {job.name} from {start.checkpoint} (step {at})")
    resumed = execute(job, runtime, replace(options, start=ResumePlan(start)), inputs=inputs)
    progress.say(f"resumed run: {_status(resumed)}")
    return stopped, start, resumed


def _status(record: RunRecord) -> str:
    return record.status + (f" ({record.failure})" if record.failure else "")


def _submit(pool: ThreadPoolExecutor, work: Callable[[], RunRecord]) -> Future[RunRecord]:
    return pool.submit(contextvars.copy_context().run, work)  # progress reaches the same reporter


def _start_of(stopped: RunRecord, at: int) -> ResumeFrom:
    """The stopped run's checkpoint of step `at`, the one the resumed run starts from."""
    saved = recorded_checkpoints(stopped)
    found = next((c for c in saved if c.step == at), None)
    later = [c.step for c in saved if c.step > at]
    if later:
        raise UsageError(
            f"{stopped.job_file}: resume.stop did not stop the job after step {at} (it went on to save the "
            f"checkpoint of step {later[0]}, run {stopped.run_dir}); make those arguments end training "
            "after step {stop}"
        )
    if found is None:
        steps = ", ".join(str(c.step) for c in saved) or "none"
        raise UsageError(
            f"the job saved no resumable checkpoint at step {at} (pattern {stopped.resume_pattern}); it "
            f"saved at steps {steps} up to there; pass one of those to --resume-at (run {stopped.run_dir})"
        )
    return ResumeFrom(
        at,
        found.path,
        stopped.output_dir,
        found.file_sha256,
        source_run=stopped.run_dir,
        optimizer_step=optimizer_steps(stopped, at),
    )


def optimizer_steps(record: RunRecord, counted: int) -> int | None:
    """The optimizer steps a run had made when it stopped after what its job counts as step `counted`.

    Most jobs number checkpoints by optimizer step, but some by epoch or by micro-batch (gradient
    accumulation); the trail counts optimizer steps, so it tells. None when it cannot: no trail, or one
    too sparse to say.
    """
    trail = trails.trail_of(record)
    if trail is None or not trail.steps:
        return None
    last, every = max(trail.steps), trail.every or 1
    if every == 1:
        return last
    return counted if counted - every < last <= counted else None


def _failed(at: int, stopped: RunRecord, sentence: str, runs: list[RunRecord] | None = None) -> ResumeCheck:
    records = runs or [stopped]
    comparison = Comparison(FAILED, [str(r.run_dir) for r in records], notes=[sentence])
    comparison.grade, comparison.sentence = "no verdict", f"no verdict: {sentence}"
    return ResumeCheck(at, comparison, stopped, sentence=comparison.sentence)


def judge(
    at: int, stopped: RunRecord, resumed: RunRecord, whole: RunRecord, *, optimizer_step: int | None
) -> ResumeCheck:
    """Compare what the resumed and the uninterrupted run left after step `at`, whose checkpoint had
    `optimizer_step` optimizer steps behind it (None: unknown, so the trails are not lined up)."""
    for record, what in ((resumed, "resumed"), (whole, "uninterrupted")):
        if not record.succeeded:
            return _failed(at, stopped, f"the {what} run failed: {record.failure}", [stopped, resumed, whole])
    paths = {r.run_dir: {str(c["path"]) for c in r.checkpoints} for r in (whole, resumed)}
    before = _files_of(whole, lambda step: step <= at) | _files_of(resumed, lambda step: step <= at)
    after = _files_of(whole, lambda step: step > at) | _files_of(resumed, lambda step: step > at)
    # what both wrote after `at`, and every resumable checkpoint after it (one that only one run saved
    # is a difference); other files only one run wrote (a log begun anew) are left out, and said so
    kept = ((paths[whole.run_dir] & paths[resumed.run_dir]) - before) | after
    compared = [r.restricted(kept) for r in (whole, resumed)]
    comparison = compare_runs(compared)
    left_out = sorted((paths[whole.run_dir] ^ paths[resumed.run_dir]) - kept - before)
    if left_out:
        comparison.notes.append(
            f"written by one run only, not compared: {', '.join(left_out[:5])}"
            + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
        )
    check = ResumeCheck(at, comparison, stopped, resumed, whole, optimizer_step=optimizer_step)
    if check.optimizer_step is not None:  # else the trails cannot be lined up step by step
        check.first_step, check.state_step, check.state = diagnose(whole, resumed, check.optimizer_step)
    check.sentence = _sentence(check)
    comparison.sentence = check.sentence
    return check


def diagnose(reference: RunRecord, resumed: RunRecord, at: int) -> tuple[int | None, int | None, list[str]]:
    """From the two runs' trails: the first optimizer step after `at` (an optimizer step too) whose
    parameters differ, and the first step whose state going in differs with the state keys that do
    (none when that state only differs once the parameters have: then it is a consequence, not the
    cause)."""
    trail_a, trail_b = trails.trail_of(reference), trails.trail_of(resumed)
    if trail_a is None or trail_b is None:
        return None, None, []
    divergence = trails.first_divergence(trail_a, trail_b)
    first = divergence["step"] if divergence else None
    found = trails.state_differences(trail_a, trail_b, at)
    if found is None or (first is not None and found[0] > first):
        return first, None, []
    return first, found[0], found[1]


def state_sentence(at: int, keys: list[str], other: str) -> str:
    """ "after resuming at step 30 the torch RNG state differs from <other>: the checkpoint does not
    restore torch.get_rng_state()"."""
    first = describe_state(keys[0])
    others = [describe_state(k)["label"] for k in keys[1:]]
    also = f" (also: {', '.join(others)})" if others else ""
    return (
        f"after resuming at step {at} the {first['label']} differs from {other}{also}: the checkpoint does "
        f"not restore {first['restore']}"
    )


def _files_of(record: RunRecord, steps: Callable[[int], bool]) -> set[str]:
    """The files of the run's resumable checkpoints whose step passes `steps`."""
    return {file for c in recorded_checkpoints(record) if steps(c.step) for file in c.file_sha256}


def _sentence(check: ResumeCheck) -> str:
    at, comparison = check.at, check.comparison
    if comparison.verdict == IDENTICAL:
        count = len(comparison.checkpoints)
        return (
            f"exact resume: stopped after step {at} and resumed from its checkpoint, the job left the same "
            f"{count} output files after step {at} as the uninterrupted run ({comparison.grade})"
        )
    if comparison.verdict != DIFFERENT:
        return comparison.sentence
    unit = "step" if check.optimizer_step == at else "optimizer step"
    where = f" from {unit} {check.first_step}" if check.first_step is not None else ""
    what = comparison.sentence.removeprefix("not reproducible: ")
    if check.state:
        found = state_sentence(at, check.state, "the uninterrupted run")
        return f"not an exact resume: {found}; the runs differ{where}: {what}"
    return (
        f"not an exact resume: after resuming at step {at} the runs differ{where}: {what}; the RNG, "
        "optimizer and scheduler states match, so the checkpoint leaves out other state (the data "
        "position, a counter, the model's buffers) or the job does not load all of it"
    )
