"""`diff`: did this change of the code change the numbers, and where.

1. Both versions of the code folder become snapshots (a commit from `git archive`, or the working tree
   as it is); the job file, seed, data and stack are the same for both.
2. Each version runs once with a trail at every step (`--max-steps K`: the first K steps only). A
   version at a fixed commit is kept (`_cache`) and reused by the next diff against it.
3. Their outputs are compared as any two runs are: equal tensors and values everywhere is
   `numerically identical`, however much the code differs.
4. Otherwise both are replayed to the first step whose trail differs with every operation recorded,
   and the first operation where one version computed a value the other never did is named, with its
   source line in each version and the hunk of the change that holds it.

Runs go to runs/<job>/.diff/, apart from the job's own runs.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from reprobox import codetree, progress
from reprobox.codediff._cache import cache_key, cached_run, keep_run, numerics_stack_differences
from reprobox.codediff._hunks import Changes, changes_between, split_source, touched_by
from reprobox.codediff._renames import renamed_tensors
from reprobox.codediff._revisions import Repository, Revision, open_repository, resolve, snapshot
from reprobox.compare import (
    DIFFERENT,
    FAILED,
    IDENTICAL,
    REPRODUCED,
    Comparison,
    compare_runs,
    divergence_text,
)
from reprobox.guest import settings
from reprobox.jobfile import JobSpec, Trail
from reprobox.records.manifest import RunRecord
from reprobox.runinputs import RunInputs
from reprobox.runner import RunOptions, execute
from reprobox.runtimes.base import Runtime

DIFF_DIR = ".diff"
REPLAYS_DIR = "replays"


@dataclass(frozen=True)
class DiffOptions:
    rev_a: str
    rev_b: str | None = None  # None: the working tree, uncommitted changes included
    drill_down: bool = True
    reuse: bool = True  # reuse a kept run of a version at a fixed commit


@dataclass
class Side:
    """One version: its revision, its code, its run, and whether the run was a kept one."""

    revision: Revision
    inputs: RunInputs
    record: RunRecord | None = None
    reused: bool = False
    key: str | None = None  # where a run of a commit is kept (`_cache`); None for the working tree

    def to_json(self) -> dict[str, Any]:
        return {
            **self.revision.to_json(),
            "label": self.revision.label,
            "code": self.inputs.code.tree.digest,
            "run": str(self.record.run_dir) if self.record else None,
            "reused": self.reused,
        }


@dataclass
class CodeDiff:
    """What `diff` found: `comparison` of the two versions' runs, and where they first parted."""

    a: Side
    b: Side
    comparison: Comparison
    changed_files: list[str] = field(default_factory=list)
    operation: dict[str, Any] | None = None
    renamed_tensors: dict[str, str] = field(default_factory=dict)  # "file: old name" -> new name
    max_steps: int | None = None  # only the first K optimizer steps were compared (by their trails)
    drill_down: str | None = None  # what the replays found, as a sentence

    @property
    def verdict(self) -> str:
        return self.comparison.verdict

    @property
    def records(self) -> list[RunRecord]:
        return [r for r in (self.a.record, self.b.record) if r is not None]

    def to_json(self) -> dict[str, Any]:
        data = self.comparison.to_json()
        data["numerically_identical"] = self.verdict == IDENTICAL
        data["a"], data["b"] = self.a.to_json(), self.b.to_json()
        data["changed_files"] = self.changed_files
        data["renamed_tensors"] = self.renamed_tensors
        data["max_steps"] = self.max_steps
        return data


def diff_versions(job: JobSpec, runtime: Runtime, run_options: RunOptions, options: DiffOptions) -> CodeDiff:
    """Run the job at two versions of its code and compare what they computed."""
    repo = open_repository(job.code, job.job_file)
    rev_a, rev_b = resolve(repo, options.rev_a), resolve(repo, options.rev_b)
    folder = run_options.runs_dir / job.name / DIFF_DIR
    job = job.with_overrides(trail=Trail(every=1))  # the first differing step, exactly
    store = folder / codetree.SNAPSHOTS_DIR
    data = codetree.digest_data(job.data)
    sides = [
        Side(revision, RunInputs(snapshot(repo, revision, store, exclude=(run_options.runs_dir,)), data))
        for revision in (rev_a, rev_b)
    ]
    a, b = sides
    changes = changes_between(repo, rev_a, rev_b)
    options_here = replace(run_options, runs_dir=folder)
    if a.inputs.code.tree.digest == b.inputs.code.tree.digest:
        progress.say(f"the code is the same at {rev_a.label} and {rev_b.label}: nothing to run")
        same = Comparison(IDENTICAL, [])
        same.sentence = f"numerically identical: the code is the same at both versions ({_short(a)})"
        return CodeDiff(a, b, same)
    _run_sides(job, runtime, options_here, sides, reuse=options.reuse)
    records = [side.record for side in sides if side.record is not None]
    comparison = compare_runs(records)
    comparison.explanation = None  # "different inputs: the code" is this command's premise, not a finding
    result = CodeDiff(a, b, comparison, changed_files=changes.files, max_steps=run_options.max_steps)
    if comparison.verdict == DIFFERENT:
        _accept_renames(result, renamed_tensors(records[0], records[1], comparison))
    comparison.sentence = _sentence(result)
    if comparison.verdict == DIFFERENT and options.drill_down and comparison.first_divergence:
        _drill_down(result, job, runtime, options_here, repo=repo, changes=changes)
    return result


def _accept_renames(result: CodeDiff, renames: dict[str, str] | None) -> None:
    """Equal tensors under new names (a renamed module): the numbers are identical; the names are listed."""
    if not renames:
        return
    comparison = result.comparison
    result.renamed_tensors = renames
    comparison.verdict, comparison.grade = IDENTICAL, REPRODUCED
    comparison.first_divergence = None
    comparison.differences, comparison.differing_tensor_total = [], 0
    shown = ", ".join(f"{old} -> {new}" for old, new in list(renames.items())[:4])
    more = f" and {len(renames) - 4} more" if len(renames) > 4 else ""
    comparison.notes.append(f"{len(renames)} tensors renamed, each equal to its old self: {shown}{more}")


def _short(side: Side) -> str:
    return side.inputs.code.tree.digest[:12]


def _run_sides(
    job: JobSpec, runtime: Runtime, options: RunOptions, sides: list[Side], *, reuse: bool
) -> None:
    """Run each version once; a version at a commit is taken from the kept runs when one matches."""
    for side in sides:
        if side.revision.commit is None:
            continue
        side.key = cache_key(side.inputs.code.tree.digest, job, runtime, options.max_steps)
        kept = cached_run(options.runs_dir, side.key) if reuse else None
        if kept is not None:
            side.record, side.reused = kept, True
            progress.say(f"{side.revision.label}: reusing its run {kept.run_dir}")
    for side in sides:
        if side.record is None:
            side.record = _run(job, runtime, options, side)
    fresh = next((s.record for s in sides if not s.reused and s.record is not None), None)
    for side in sides:
        if not side.reused or fresh is None or side.record is None or not fresh.succeeded:
            continue
        moved = numerics_stack_differences(side.record, fresh)
        if moved:
            progress.say(
                f"{side.revision.label}: its kept run ran on another stack ({', '.join(moved)}); "
                "running it again"
            )
            side.record, side.reused = _run(job, runtime, options, side), False
    for side in sides:
        if side.record is not None and side.key is not None and not side.reused:
            keep_run(options.runs_dir, side.key, side.record)


def _run(job: JobSpec, runtime: Runtime, options: RunOptions, side: Side) -> RunRecord:
    progress.say(f"running {job.name} at {side.revision.label} (code {_short(side)}, {runtime.name})")
    record = execute(job, runtime, options, inputs=side.inputs)
    progress.say(
        f"{side.revision.label}: {record.status}" + (f" ({record.failure})" if record.failure else "")
    )
    return record


def _sentence(result: CodeDiff) -> str:
    comparison = result.comparison
    versions = f"{result.a.revision.label} and {result.b.revision.label}"
    if comparison.verdict == IDENTICAL and result.max_steps is not None:
        return (
            f"numerically identical over the first {result.max_steps} steps: every parameter and loss the "
            f"trails recorded is equal at {versions} (later steps were not run)"
        )
    if comparison.verdict == IDENTICAL:
        return f"numerically identical: every tensor and value the job saved is equal at {versions}"
    if comparison.verdict == FAILED:
        failed = next(
            (s for s in (result.a, result.b) if s.record is not None and not s.record.succeeded), None
        )
        if failed is not None and failed.record is not None:
            why = failed.record.failure or failed.record.status
            log = failed.record.run_dir / "stdout.log"
            return f"the job failed at {failed.revision.label} ({why}; see {log}): no comparison"
        return "no comparison: " + "; ".join(comparison.notes)
    first = comparison.first_divergence
    if first and first.get("step") is not None:
        return "the numbers differ: " + divergence_text(first)
    return "the numbers are the same at every step, yet what the job saved differs: " + "; ".join(
        _saved_differences(comparison)
    )


def _saved_differences(comparison: Comparison) -> list[str]:
    found = [
        f"{d['checkpoint']}: {d['name']} is {d['a']!r} vs {d['b']!r}"
        for d in comparison.value_differences[:3]
    ]
    found += [f"{d.get('name') or d.get('checkpoint')} differs" for d in comparison.differences[:3]]
    found += [f"{o.get('path') or o}" for o in comparison.one_sided[:3]]
    return found or comparison.notes[:3]


def _drill_down(
    result: CodeDiff,
    job: JobSpec,
    runtime: Runtime,
    options: RunOptions,
    *,
    repo: Repository,
    changes: Changes,
) -> None:
    """Replay both versions to the first differing step, every operation recorded, and name the first one
    where they computed differently, with the change that holds its line."""
    from reprobox.forensics import drilldown

    first = result.comparison.first_divergence or {}
    step = first.get("step")
    if not isinstance(step, int):
        return
    recorded = [s for s in (step - 1, step) if s >= 1]
    progress.say(
        f"drill-down: replaying both versions to step {step}, recording every operation of "
        f"step{'s' if len(recorded) > 1 else ''} {' and '.join(map(str, recorded))}"
    )
    env = {**options.extra_env, settings.OPLOG_STEPS: ",".join(map(str, recorded))}
    replay = replace(
        options, runs_dir=options.runs_dir / REPLAYS_DIR, max_steps=step, extra_env=env, echo=None
    )
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [
            pool.submit(contextvars.copy_context().run, execute, job, runtime, replay, inputs=side.inputs)
            for side in (result.a, result.b)
        ]
        replays = [future.result() for future in futures]
    found: dict[str, Any] = {
        "step": step,
        "recorded_steps": recorded,
        "replays": [str(r.run_dir) for r in replays],
        "ranks": {},
    }
    first["drill_down"] = found
    failed = next((r for r in replays if not r.succeeded), None)
    if failed is not None:
        why = failed.failure or failed.status
        found["sentence"] = result.drill_down = (
            f"a replay failed ({why}; see {failed.run_dir}): no drill-down"
        )
        return
    operation, ranks = drilldown.analyze(replays[0].run_dir, replays[1].run_dir, versions=True)
    found["ranks"] = ranks
    if operation is None:
        found["sentence"] = result.drill_down = (
            f"the replays computed the same values in every recorded operation of step(s) "
            f"{', '.join(map(str, recorded))}: the difference came from outside torch's operators"
        )
        return
    operation["change"] = _place_in_change(operation, repo, changes, result)
    first["operation"] = result.operation = operation
    found["sentence"] = result.drill_down = operation["sentence"]


def _place_in_change(
    operation: dict[str, Any], repo: Repository, changes: Changes, result: CodeDiff
) -> dict[str, Any]:
    source_a, source_b = operation.get("source_a"), operation.get("source_b")
    hunk = changes.hunk_of(source_a, source_b)
    place: dict[str, Any] = {
        "inside": hunk is not None,
        "source_a": source_a,
        "source_b": source_b,
        "source_a_in_b": changes.map_line(source_a) if source_a else None,
    }
    if hunk is not None:
        place["hunk"] = hunk.to_json()
        place["hunk_text"] = hunk.text()
        where = source_b if hunk.holds_b(_line(source_b)) else None
        commit = touched_by(repo, result.a.revision, result.b.revision, where) if where else None
        if commit is not None:
            place["commit"] = commit
    return place


def _line(source: str | None) -> int:
    return split_source(source)[1] or 0
