"""The drill-down: from "runs differ at step 23" to the operation that made them differ.

1. Bracket: when the trail was sparse (or absent), the job is replayed twice with a trail at every
   step, each rerun checked live against the first, up to the step where the runs were seen to differ:
   the replays stop at the first step that differs.
2. Record: the job is replayed twice up to that step with every operation of that step and the one
   before recorded (`reprobox.guest.oplog`): a difference that entered through the optimizer's state
   shows in the step before.
3. Align the two logs and name the first diverging operation and its cause (`_cause`), per rank, and
   the rank that diverged first.

Replays are ordinary runs (a manifest, a trail, the op logs), kept apart from the job's own runs in
runs/<job>/.drill-down/ so that `latest` and the run listing are not theirs. A divergence that the
replays do not show again is reported as not reproduced in replay, never blamed on an operation.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reprobox import progress
from reprobox.compare import FAILED, Comparison
from reprobox.forensics.drilldown._cause import first_operation
from reprobox.forensics.drilldown._versions import first_changed_operation
from reprobox.guest import settings
from reprobox.jobfile import JobSpec, Trail
from reprobox.records.manifest import RunRecord
from reprobox.records.oplog import read_oplogs
from reprobox.runinputs import RunInputs
from reprobox.runner import RunOptions
from reprobox.runtimes.base import Runtime

REPLAYS_DIR = ".drill-down"
REPLAY = "drill-down replay"  # how a replay is named while it runs


@dataclass
class DrillDown:
    """What the drill-down found: `operation` is the first diverging operation (None when not found)."""

    sentence: str
    step: int | None = None
    operation: dict[str, Any] | None = None
    ranks: dict[str, str] = field(default_factory=dict)  # each rank's own first divergence, as a sentence
    replays: list[str] = field(default_factory=list)
    recorded_steps: list[int] = field(default_factory=list)
    reproduced_in_replay: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "sentence": self.sentence,
            "step": self.step,
            "recorded_steps": self.recorded_steps,
            "replays": self.replays,
            "reproduced_in_replay": self.reproduced_in_replay,
            "ranks": self.ranks,
        }


def replays_dir(runs_dir: Path, job: JobSpec) -> Path:
    return runs_dir / job.name / REPLAYS_DIR


def drill_down(
    job: JobSpec,
    runtime: Runtime,
    run_options: RunOptions,
    first: dict[str, Any] | None,
    *,
    inputs: RunInputs | None = None,
) -> DrillDown:
    """Replay the job to find the first diverging operation; `first` is the trail's first divergence
    (None when the runs recorded no trail: then every step is replayed until one differs)."""
    from reprobox.verify import VerifyOptions, verify

    every_step = job.with_overrides(trail=Trail(every=1))
    options = replace(
        run_options, runs_dir=replays_dir(run_options.runs_dir, job), echo=None, reference_run=None
    )
    step = first.get("step") if first else None
    if not isinstance(step, int) or not (first or {}).get("exact"):
        where = f"up to step {step}" if isinstance(step, int) else "to its end"
        progress.say(
            f"drill-down: replaying {job.name} twice {where}, step by step, to find the first step "
            "that differs"
        )
        bracket, records = verify(
            every_step,
            runtime,
            replace(options, max_steps=step if isinstance(step, int) else run_options.max_steps),
            VerifyOptions(runs=2, stop_on_divergence=True, tensor_details=False, what=REPLAY),
            inputs=inputs,
        )
        replays = [str(r.run_dir) for r in records]
        failed = _failure(bracket, records)
        if failed:
            return DrillDown(failed, replays=replays)
        found = bracket.first_divergence
        if found is None:
            return _not_reproduced(step, replays)
        step = int(found["step"])
    assert isinstance(step, int)
    for _attempt in range(2):
        recorded = [s for s in (step - 1, step) if s >= 1]
        progress.say(
            f"drill-down: replaying {job.name} twice to step {step}, recording every operation of "
            f"step{'s' if len(recorded) > 1 else ''} {' and '.join(map(str, recorded))}"
        )
        env = {**options.extra_env, settings.OPLOG_STEPS: ",".join(map(str, recorded))}
        comparison, records = verify(
            every_step,
            runtime,
            replace(options, max_steps=step, extra_env=env),
            VerifyOptions(runs=2, parallel=2, keep_going=True, tensor_details=False, what=REPLAY),
            inputs=inputs,
        )
        replays = [str(r.run_dir) for r in records]
        failed = _failure(comparison, records)
        if failed:
            return DrillDown(failed, step=step, replays=replays, recorded_steps=recorded)
        diverged = comparison.first_divergence
        if diverged is None:
            return _not_reproduced(step, replays, recorded)
        if int(diverged["step"]) < recorded[0]:  # this pair of replays parted earlier: record there
            step = int(diverged["step"])
            continue
        return _explained(records, step, recorded, replays)
    return DrillDown(
        f"the replays diverged at a different step each time (last at step {step}): the nondeterminism "
        "does not recur at one place",
        step=step,
    )


def analyze(
    run_a: Path, run_b: Path, *, versions: bool = False
) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The first diverging operation of two runs that recorded op logs (the earliest over ranks), and
    each rank's own first divergence as a sentence; `versions`: the runs ran two versions of the code."""
    logs_a, logs_b = read_oplogs(run_a), read_oplogs(run_b)
    find = first_changed_operation if versions else first_operation
    found: list[dict[str, Any]] = []
    for rank in sorted(set(logs_a) & set(logs_b)):
        operation = find(logs_a[rank], logs_b[rank])
        if operation is not None:
            found.append(operation)
    ranks = {str(op["rank"]): op["sentence"] for op in found}
    if not found:
        return None, ranks
    first = min(found, key=lambda op: (op["step"], op.get("time_ns") or 0))
    if len(found) > 1:
        first["sentence"] = f"rank {first['rank']} diverged first: {first['sentence']}"
    for op in found:
        op.pop("time_ns", None)
    return first, ranks


def _explained(records: list[RunRecord], step: int, recorded: list[int], replays: list[str]) -> DrillDown:
    operation, ranks = analyze(records[0].run_dir, records[1].run_dir)
    if operation is None:
        return DrillDown(
            f"the replays differ at step {step}, yet every recorded operation of step(s) "
            f"{', '.join(map(str, recorded))} read and wrote equal values: the change was made outside "
            "torch's operators (memory written through .numpy() or a C extension)",
            step=step,
            replays=replays,
            recorded_steps=recorded,
        )
    return DrillDown(
        operation["sentence"],
        step=int(operation["step"]),
        operation=operation,
        ranks=ranks,
        replays=replays,
        recorded_steps=recorded,
    )


def _not_reproduced(step: int | None, replays: list[str], recorded: list[int] | None = None) -> DrillDown:
    where = f"by step {step}" if step is not None else "in any step"
    return DrillDown(
        f"not reproduced in replay: two replays did not differ {where}, so no operation is blamed (a race "
        "or a nondeterministic kernel that happened to agree this time; verify again with more --runs)",
        step=step,
        replays=replays,
        recorded_steps=recorded or [],
        reproduced_in_replay=False,
    )


def _failure(comparison: Comparison, records: list[RunRecord]) -> str | None:
    if comparison.verdict == FAILED:
        record = next((r for r in records if r.failure), records[0] if records else None)
        why = f" ({record.failure or record.status}; see {record.run_dir})" if record else ""
        return f"a replay failed{why}: no drill-down"
    if len(records) < 2:
        return "the replays did not both run: no drill-down"
    return None
