"""`reproduce --seeds N`: the first N published seeds rerun here, and each claim's spread over them
against the author's (each mean inside the other's interval, `reprobox.seeds.compare_spreads`)."""

from __future__ import annotations

from typing import Any

from reprobox import progress, seeds
from reprobox.errors import EXIT_JOB_FAILED, EXIT_NOT_REPRODUCIBLE, UsageError
from reprobox.jobfile import JobSpec
from reprobox.records.attestation import Attestation
from reprobox.records.manifest import RunRecord
from reprobox.reproduce._grade import GRADE_NOT_REPRODUCED
from reprobox.reproduce._model import FAILED, Context, ReproduceResult
from reprobox.runinputs import RunInputs
from reprobox.runner import RunOptions, execute
from reprobox.runtimes.base import Runtime


def check_seed_count(attestation: Attestation, count: int | None) -> list[int]:
    """The published seeds to rerun; refused before anything runs when the attestation has too few."""
    if count is None:
        return []
    published = attestation.seeds
    if published is None:
        raise UsageError(
            f"--seeds needs an attestation made by `reprobox verify --seeds N`, but {attestation.path} "
            "records one seed; reproduce it without --seeds"
        )
    listed = [int(s) for s in published.get("seeds") or []]
    if not 2 <= count <= len(listed):
        raise UsageError(
            f"--seeds must be from 2 to {len(listed)}, the seeds the attestation records "
            f"({', '.join(map(str, listed))}), not {count}"
        )
    return listed[:count]


def reproduce_seeds(
    ctx: Context,
    spec: JobSpec,
    runtime: Runtime,
    records: list[RunRecord],
    result: ReproduceResult,
    *,
    run_options: RunOptions,
    inputs: RunInputs,
) -> None:
    """Run the other seeds once each, then judge every claim's spread; the first seed is the run
    the reproduction already made."""
    chosen = check_seed_count(ctx.attestation, ctx.options.seeds)
    published = ctx.attestation.seeds or {}
    runs: list[tuple[int, RunRecord]] = [(chosen[0], records[0])]
    series = progress.Series(len(chosen), "seed run")
    for index, seed in enumerate(chosen[1:], start=2):
        progress.say(f"seed {seed} ({index}/{len(chosen)}) of {spec.name}")
        label = series.label(index)
        record = execute(spec.with_overrides(seed=seed), runtime, run_options, inputs=inputs, label=label)
        runs.append((seed, record))
        result.runs.append(record.run_dir)
        if not record.succeeded:
            result.verdict, result.grade, result.exit_code = FAILED, GRADE_NOT_REPRODUCED, EXIT_JOB_FAILED
            result.sentence = f"the job failed here with seed {seed} ({record.failure}); see {record.run_dir}"
            return
    result.seed_runs = [_seed_run(seed, record, published) for seed, record in runs]
    author = {
        name: seeds.Spread(tuple(s["values"]), tuple(s.get("seeds") or ()))
        for name, s in (published.get("claims") or {}).items()
    }
    checks = seeds.compare_spreads(spec.claims, author, seeds.spread_of(spec.claims, runs))
    result.seed_spread = {c.name: c.to_json() for c in checks}
    failing = [c for c in checks if not c.holds]
    if failing:
        result.grade, result.exit_code = GRADE_NOT_REPRODUCED, EXIT_NOT_REPRODUCIBLE
        shown = "; ".join(c.text() for c in failing)
        result.sentence = (
            f"not reproduced: the spread over {len(chosen)} seeds does not hold ({shown}); {result.sentence}"
        )
    elif checks:
        names = ", ".join(c.name for c in checks)
        result.sentence += f"; the spread over {len(chosen)} seeds holds ({names})"


def _seed_run(seed: int, record: RunRecord, published: dict[str, Any]) -> dict[str, Any]:
    """One seed's run here, and whether its checkpoints equal that seed's published ones."""
    theirs = (published.get("checkpoints") or {}).get(str(seed))
    mine = sorted((c["path"], c.get("content_sha256")) for c in record.checkpoints)
    identical = None
    if isinstance(theirs, list):
        identical = mine == sorted(
            (c.get("path"), c.get("content_sha256")) for c in theirs if isinstance(c, dict)
        )
    return {"seed": seed, "run": str(record.run_dir), "identical_to_published": identical}
