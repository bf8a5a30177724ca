"""Segment spot-checks: check a finished run by replaying a few of its segments, not the whole of it.

A run's resumable checkpoints cut it into segments: from the start to the first checkpoint and from each
checkpoint to the next (what a run writes after its last checkpoint, and logs it grows over the whole
run, are no segment's end: a full `verify` checks those). A replayed
segment starts from the checkpoint the run recorded at its start (its bytes checked against the record
first: an altered checkpoint is reported, never replayed), stops after the segment's last step, and
must leave the checkpoint the run recorded at its end. Which segments are replayed is drawn at random,
seeded by the run's own checkpoint hashes unless a seed is given, so whoever made the run cannot pick
them: one fabricated segment among n is caught with probability M/n by a check of M.
"""

from __future__ import annotations

import contextvars
import hashlib
import random
import shutil
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reprobox import progress, trails
from reprobox.compare import IDENTICAL, compare_runs
from reprobox.errors import UsageError
from reprobox.jobfile import JobSpec
from reprobox.records.manifest import RunRecord, write_record
from reprobox.resume.checkpoints import RecordedCheckpoint, recorded_checkpoints
from reprobox.resume.exact import diagnose, optimizer_steps, state_sentence
from reprobox.resume.start import CheckpointAltered, ResumeFrom, ResumePlan
from reprobox.runinputs import RunInputs
from reprobox.runner import RunOptions, execute
from reprobox.runtimes.base import Runtime

END_VIEW = "segment-end"  # in a replay whose end checkpoint lies elsewhere: it, under the run's path
REPLAYS_DIR = ".spot-check"  # under runs/<job>/, so that `latest` and run listings stay the job's own
ALL = "all"

MATCH, DIFFERS, ALTERED, FAILED = "match", "differs", "altered", "failed"


@dataclass(frozen=True)
class Segment:
    """Optimizer steps start+1 .. end, judged by the checkpoint the run saved after step `end`."""

    start: int
    end: int
    start_checkpoint: RecordedCheckpoint | None  # None: from the beginning
    end_checkpoint: RecordedCheckpoint

    def text(self) -> str:
        return f"steps {self.start}-{self.end}"


@dataclass
class SegmentResult:
    segment: Segment
    outcome: str  # match, differs, altered, failed
    sentence: str
    run_dir: Path | None = None
    differences: list[dict[str, Any]] = field(default_factory=list)
    # whether the replay's trail counted as many optimizer steps as the job counts steps (False for a
    # job that numbers checkpoints by epoch or micro-batch): only then do trails line up step by step
    lined_up: bool = True

    @property
    def match(self) -> bool:
        return self.outcome == MATCH

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.segment.start,
            "end": self.segment.end,
            "match": self.match,
            "outcome": self.outcome,
            "sentence": self.sentence,
            "run_dir": str(self.run_dir) if self.run_dir else None,
            "start_checkpoint": self.segment.start_checkpoint.path if self.segment.start_checkpoint else None,
            "end_checkpoint": self.segment.end_checkpoint.path,
            "differences": self.differences,
        }


@dataclass
class SpotCheck:
    """The segments of one run, which were drawn and how each replay came out."""

    run_dir: Path
    segments: list[Segment]
    seed: int
    seed_source: str  # "checkpoint hashes" or "--seed"
    total_steps: int | None
    results: list[SegmentResult] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if any(r.outcome in (DIFFERS, ALTERED) for r in self.results):
            return "different"
        if any(r.outcome == FAILED for r in self.results):
            return "failed"
        return "identical"

    @property
    def replayed_share(self) -> float | None:
        """The share of the run's steps that was replayed; counted in the job's own steps up to its last
        checkpoint when those are not optimizer steps (epochs, micro-batches)."""
        total = self.total_steps if all(r.lined_up for r in self.results) else self.segments[-1].end
        if not total:
            return None
        steps = sum(r.segment.end - r.segment.start for r in self.results)
        return steps / total

    def sentence(self) -> str:
        n, m = len(self.segments), len(self.results)
        detection = f"one fabricated segment among {n} is caught with probability {m}/{n} per check"
        bad = [r for r in self.results if not r.match]
        if not bad:
            return f"every replayed segment matches ({m} of {n}: {self._steps()}); {detection}"
        first = bad[0]
        return f"{first.segment.text()} {first.outcome}: {first.sentence}"

    def _steps(self) -> str:
        share = self.replayed_share
        listed = ", ".join(r.segment.text() for r in self.results)
        return listed + (f"; {share:.0%} of the run's steps replayed" if share is not None else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "sentence": self.sentence(),
            "run": str(self.run_dir),
            "segments_total": len(self.segments),
            "segments": [r.to_json() for r in self.results],
            "seed": self.seed,
            "seed_source": self.seed_source,
            "total_steps": self.total_steps,
            "replayed_share": self.replayed_share,
            "detection_probability": len(self.results) / len(self.segments) if self.segments else None,
        }


def segments_of(record: RunRecord) -> tuple[list[Segment], int | None]:
    """The run's segments in order, and its number of optimizer steps (from its trail, when it has one)."""
    saved = recorded_checkpoints(record)
    if not saved:
        raise UsageError(
            f"{record.run_dir} has no resumable checkpoints"
            + (
                f" matching its job's resume.checkpoint ({record.resume_pattern})"
                if record.resume_pattern
                else " (its job file has no 'resume:' section)"
            )
            + "; a spot-check replays the segments between them"
        )
    trail = trails.trail_of(record)
    total = max(trail.steps) if trail is not None and trail.steps else saved[-1].step
    segments: list[Segment] = []
    previous: RecordedCheckpoint | None = None
    for checkpoint in saved:
        segments.append(Segment(previous.step if previous else 0, checkpoint.step, previous, checkpoint))
        previous = checkpoint
    return segments, max(total, saved[-1].step)


def draw_seed(saved: Sequence[RecordedCheckpoint]) -> int:
    """A seed from the run's own checkpoint hashes: fixed by the run, not chosen by whoever checks it."""
    joined = "\n".join(f"{c.step}:{c.content_sha256}" for c in saved)
    return int(hashlib.sha256(joined.encode()).hexdigest()[:16], 16)


def choose(segments: list[Segment], count: str | int, seed: int) -> list[Segment]:
    """`count` segments (or all), drawn with `seed`, in run order."""
    if count == ALL:
        return list(segments)
    if not isinstance(count, int) or count < 1:
        raise UsageError(f"--segments must be a positive number or 'all', not {count!r}")
    # reproducible from the seed by anyone (not secret): the run's hashes fix it, so no one picks
    chosen = random.Random(seed).sample(  # noqa: S311
        range(len(segments)), min(count, len(segments))
    )
    return [segments[i] for i in sorted(chosen)]


def parse_count(text: str) -> str | int:
    if text == ALL:
        return ALL
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise UsageError(f"--segments must be a positive number of segments or 'all', not {text!r}")
    return count


def plan_spot_check(record: RunRecord, count: str | int, seed: int | None) -> tuple[SpotCheck, list[Segment]]:
    """Cut the run into segments and draw the ones to replay (nothing runs yet)."""
    segments, total = segments_of(record)
    drawn = draw_seed(recorded_checkpoints(record)) if seed is None else seed
    check = SpotCheck(
        record.run_dir, segments, drawn, "checkpoint hashes" if seed is None else "--seed", total
    )
    return check, choose(segments, count, drawn)


def spot_check(
    record: RunRecord,
    job: JobSpec,
    runtime: Runtime,
    run_options: RunOptions,
    *,
    chosen: list[Segment],
    check: SpotCheck,
    parallel: int = 1,
    inputs: RunInputs,
) -> SpotCheck:
    """Replay the chosen segments (up to `parallel` side by side) and judge each against the run."""
    options = replace(run_options, runs_dir=run_options.runs_dir / job.name / REPLAYS_DIR)
    if parallel > 1:
        options = replace(options, echo=None)
    progress.say(
        f"spot-check of {record.run_dir.name}: {len(chosen)} of {len(check.segments)} segments "
        f"({', '.join(s.text() for s in chosen)}), {max(1, parallel)} at a time ({runtime.name})"
    )

    stop = threading.Event()

    def replay(segment: Segment) -> SegmentResult:
        result = replay_segment(record, job, runtime, options, segment=segment, inputs=inputs, stop=stop)
        progress.say(f"segment {segment.text()}: {result.outcome}")
        return result

    work: list[Callable[[], SegmentResult]] = [lambda s=s: replay(s) for s in chosen]  # type: ignore[misc]
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(chosen)))) as pool:
        futures = [pool.submit(contextvars.copy_context().run, w) for w in work]
        try:
            check.results = [f.result() for f in futures]
        except BaseException:
            stop.set()  # Ctrl-C: the replays running are stopped, those not started never start
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return check


def replay_segment(
    record: RunRecord,
    job: JobSpec,
    runtime: Runtime,
    options: RunOptions,
    *,
    segment: Segment,
    inputs: RunInputs,
    stop: threading.Event | None = None,
) -> SegmentResult:
    """Run one segment from its recorded start checkpoint and compare its end with the run's."""
    start = None
    if segment.start_checkpoint is not None:
        checkpoint = segment.start_checkpoint
        start = ResumeFrom(
            checkpoint.step, checkpoint.path, record.output_dir, checkpoint.file_sha256, record.run_dir
        )
    try:
        replayed = execute(
            job,
            runtime,
            replace(options, start=ResumePlan(start, segment.end)),
            inputs=inputs,
            stop=stop,
            label=progress.RunLabel(f"spot-check {segment.text()}"),
        )
    except CheckpointAltered as exc:
        return SegmentResult(segment, ALTERED, exc.message)
    if not replayed.succeeded:
        return SegmentResult(segment, FAILED, f"the replay failed: {replayed.failure}", replayed.run_dir)
    return judge_segment(record, replayed, segment)


def judge_segment(record: RunRecord, replayed: RunRecord, segment: Segment) -> SegmentResult:
    """The replay's checkpoint at the segment's end against the run's: every tensor and value equal."""
    ends = {c.step: c for c in recorded_checkpoints(replayed)}
    theirs = ends.get(segment.end)
    lined_up = optimizer_steps(replayed, segment.end) == segment.end
    what = segment.end_checkpoint.path
    if theirs is None:
        sentence = f"the replay saved no checkpoint at step {segment.end} (the run saved {what})"
        return SegmentResult(segment, DIFFERS, sentence, replayed.run_dir, lined_up=lined_up)
    mine = record.restricted(set(segment.end_checkpoint.file_sha256), claims=False)
    comparison = compare_runs([mine, _at_run_paths(replayed, theirs, what)])
    if comparison.verdict == IDENTICAL:
        sentence = f"{what} equal to the recorded one ({comparison.grade})"
        return SegmentResult(segment, MATCH, sentence, replayed.run_dir, lined_up=lined_up)
    sentence = comparison.sentence.removeprefix("not reproducible: ")
    if comparison.verdict != "different":
        return SegmentResult(segment, FAILED, sentence, replayed.run_dir, lined_up=lined_up)
    state: list[str] = []
    if lined_up:  # else the replay's trail and the run's cannot be compared step by step
        _first, _state_step, state = diagnose(record, replayed, segment.start)
    why = f"; {state_sentence(segment.start, state, 'the run')}" if state and segment.start else ""
    return SegmentResult(
        segment,
        DIFFERS,
        f"{what} differs from the recorded one: {sentence}{why}",
        replayed.run_dir,
        comparison.differences[:20] + comparison.value_differences[:20],
        lined_up=lined_up,
    )


def _at_run_paths(replayed: RunRecord, checkpoint: RecordedCheckpoint, path: str) -> RunRecord:
    """The replay's end checkpoint as a record, under the run's path for it: a resumed job may write
    it elsewhere (Lightning's logger starts a new version folder when it finds the old one)."""
    files = set(checkpoint.file_sha256)
    if checkpoint.path == path:
        return replayed.restricted(files, claims=False)
    view = replayed.run_dir / END_VIEW
    entries = []
    for entry in replayed.checkpoints:
        source = str(entry.get("path"))
        if source not in files:
            continue
        target = path + source[len(checkpoint.path) :]
        (view / "outputs" / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(replayed.output_dir / source, view / "outputs" / target)
        entries.append({**entry, "path": target})
    return write_record(view, {**replayed.data, "checkpoints": entries, "claims": []})
