"""The runs here against the author's published hashes -> the verdict, its exit code and its sentence:
bit-identical, a real nondeterminism on the same stack, or a different stack (with how far apart)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from reprobox import attest, bundle, stackdiff
from reprobox.compare import BIT_IDENTICAL as GRADE_BIT_IDENTICAL
from reprobox.compare import CLAIMS, DIFFERENT, IDENTICAL, Comparison, compare_runs, differing_tensor_names
from reprobox.errors import EXIT_JOB_FAILED, EXIT_NOT_REPRODUCIBLE, EXIT_OK, EnvironmentProblem, UsageError
from reprobox.records.manifest import RunRecord, write_record
from reprobox.reproduce._grade import grade
from reprobox.reproduce._model import (
    BIT_IDENTICAL,
    DIFFERENT_STACK,
    FAILED,
    NONDETERMINISTIC,
    REPRODUCED,
    SENTENCE_IDENTICAL,
    SENTENCE_REPRODUCED,
    Context,
    ReproduceResult,
)
from reprobox.reproduce._replay import THREAD_VARIABLES, without_replay_pins
from reprobox.reproduce._report import report_dir_for
from reprobox.reproduce._variation import variation_notes
from reprobox.valuetext import show_number

NAMED_FIELDS = 6


def classify(ctx: Context, records: list[RunRecord], result: ReproduceResult) -> None:
    """The verdict on the bits, then the grade (which adds the claims) on top of it."""
    _classify_bits(ctx, records, result)
    if result.verdict != FAILED:
        grade(ctx, ctx.claims, records, result)


def _classify_bits(ctx: Context, records: list[RunRecord], result: ReproduceResult) -> None:
    failed = next((r for r in records if not r.succeeded), None)
    if failed is not None:
        result.verdict, result.exit_code = FAILED, EXIT_JOB_FAILED
        result.sentence = (
            f"the job failed here ({failed.failure or failed.status}), so there is nothing to compare; "
            f"see {failed.run_dir / 'stdout.log'}"
        )
        return
    ctx.report_dir = report_dir_for(ctx)
    published = ctx.published_record = published_record(ctx, ctx.report_dir)
    comparison = compare_runs([published, *records])
    result.comparison = comparison
    if comparison.verdict == IDENTICAL:
        if comparison.grade == GRADE_BIT_IDENTICAL:
            result.verdict, result.exit_code, result.sentence = BIT_IDENTICAL, EXIT_OK, SENTENCE_IDENTICAL
        else:
            result.verdict, result.exit_code, result.sentence = REPRODUCED, EXIT_OK, SENTENCE_REPRODUCED
        ctx.notes.extend(variation_notes(ctx.attestation, [])[0])
        return
    differing = next((r for r in records if not _same_content(published, r)), None)
    if differing is None:  # every checkpoint equal: what differs is a claimed number (see the grade)
        result.verdict, result.exit_code = NONDETERMINISTIC, EXIT_NOT_REPRODUCIBLE
        result.sentence = (
            "every checkpoint equals the published one, but a claimed number differs "
            f"({compare_claims_text(comparison)})"
        )
        return
    diffs = _without_replay_pins(
        ctx,
        stackdiff.diff_fingerprints(
            attest.public_fingerprint(published.fingerprint), attest.public_fingerprint(differing.fingerprint)
        ),
    )
    ctx.stack_differences = diffs
    notes, varied = variation_notes(ctx.attestation, diffs)
    ctx.notes.extend(notes)
    result.stack_differences = [
        {
            "field": d.field,
            "label": d.label,
            "author": d.a,
            "here": d.b,
            "affects_numerics": d.affects_numerics,
        }
        for d in diffs
    ]
    result.differing_tensors, result.max_abs_difference, comparable = _tensor_numbers(
        ctx, published, differing
    )
    amount = _amount(ctx, result.differing_tensors, result.max_abs_difference)
    own = compare_runs(records, tensor_details=False) if len(records) > 1 else None
    labels = list(dict.fromkeys(d.label for d in diffs if d.affects_numerics))
    if own is not None and own.verdict == DIFFERENT:
        result.verdict, result.exit_code = NONDETERMINISTIC, EXIT_NOT_REPRODUCIBLE
        result.sentence = f"{stackdiff.SAME_STACK}: the {len(records)} runs here differ from each other"
    elif not labels:
        result.verdict, result.exit_code = NONDETERMINISTIC, EXIT_NOT_REPRODUCIBLE
        result.sentence = f"{stackdiff.SAME_STACK}; {amount}"
    else:
        result.verdict, result.exit_code = DIFFERENT_STACK, EXIT_NOT_REPRODUCIBLE
        listing = ", ".join(labels[:NAMED_FIELDS]) + (
            f" and {len(labels) - NAMED_FIELDS} more" if len(labels) > NAMED_FIELDS else ""
        )
        result.sentence = (
            f"different stack: bitwise equality not expected; {amount}; the stacks differ in {listing}"
        )
        if varied:
            result.sentence += f" ({varied})"
        tolerance = ctx.options.tolerance
        if tolerance is not None:
            met = (
                comparable
                and result.max_abs_difference is not None
                and result.max_abs_difference <= tolerance
            )
            result.within_tolerance = bool(met)
            result.sentence += f"; {'within' if met else 'outside'} --tolerance {tolerance:g}"
            result.exit_code = EXIT_OK if met else EXIT_NOT_REPRODUCIBLE


def compare_claims_text(comparison: Comparison) -> str:
    shown = [
        f"{d['name']}: published {d['a']}, here {d['b']}"
        for d in comparison.value_differences
        if d.get("checkpoint") == CLAIMS
    ]
    return "; ".join(shown[:NAMED_FIELDS])


def _without_replay_pins(
    ctx: Context, diffs: list[stackdiff.FieldDifference]
) -> list[stackdiff.FieldDifference]:
    """The differences less the thread variables the replay pinned, with a note saying so."""
    kept = without_replay_pins(diffs, ctx.replay_pin)
    if len(kept) < len(diffs):
        ctx.notes.append(
            f"{', '.join(THREAD_VARIABLES)} were set to {ctx.replay_pin} here to replay the author's "
            "unpinned thread count; they are not counted as a stack difference"
        )
    return kept


def _same_content(a: RunRecord, b: RunRecord) -> bool:
    contents = {c["path"]: c.get("content_sha256") for c in a.checkpoints}
    return contents == {c["path"]: c.get("content_sha256") for c in b.checkpoints}


def _tensor_numbers(ctx: Context, published: RunRecord, other: RunRecord) -> tuple[int, float | None, bool]:
    """(differing tensors, max abs difference over all of them, every one comparable) against the author."""
    count, comparable = 0, ctx.published is not None
    values: list[float] = []
    for entry in published.checkpoints:
        mine = other.checkpoint(entry["path"])
        if mine is None:
            comparable = False
            continue
        names = differing_tensor_names(entry, mine)
        if entry.get("content_sha256") == mine.get("content_sha256"):
            continue
        count += len(names)
        if ctx.published is None or names == ["<file>"]:
            comparable = comparable and names != ["<file>"]
            continue
        from reprobox import tensordiff

        try:
            diffs = tensordiff.diff_checkpoint_files(
                ctx.published / entry["path"],
                other.output_dir / entry["path"],
                checkpoint=entry["path"],
                names=names,
            )
        except (UsageError, EnvironmentProblem) as exc:  # refused by a limit, or changed while it was read:
            # its hashes still judge it
            ctx.notes.append(f"checkpoint {entry['path']}: tensor statistics unavailable ({exc.message})")
            comparable = False
            continue
        for diff in diffs:
            if diff.max_abs is None:
                comparable = False
            else:
                values.append(diff.max_abs)
    if not values:
        return count, None, comparable
    worst = math.nan if any(math.isnan(v) for v in values) else max(values)
    return count, worst, comparable


def _amount(ctx: Context, count: int, worst: float | None) -> str:
    if worst is not None:
        return f"max difference {show_number(worst)} over {count} tensors"
    if ctx.published is None:
        return (
            f"{count} tensors differ (how much needs the author's checkpoint files: pass --published DIR, "
            "or reproduce a bundle packed with --published)"
        )
    return f"{count} tensors differ"


def published_record(ctx: Context, report_dir: Path) -> RunRecord:
    """The author's result as a run record (so compare and the report treat it as run A)."""
    attestation = ctx.attestation
    where = (report_dir / "published").absolute()
    where.mkdir(parents=True, exist_ok=True)
    if ctx.published is not None:
        (where / "outputs").symlink_to(ctx.published.absolute(), target_is_directory=True)
    trail = None
    if ctx.published_trail is not None:
        trail = bundle.TRAIL_NAME
        shutil.copyfile(ctx.published_trail, where / trail)  # a copy: a run's trail is read as its own file
    return write_record(
        where,
        {
            "run_id": "published",
            "job_name": attestation.job["name"],
            "status": "succeeded",
            "started_at": attestation.runs_started_at,
            "ended_at": attestation.runs_ended_at,
            "attestation": str(attestation.path),
            "job": attestation.job_spec,
            "fingerprint": attestation.fingerprint,
            "checkpoints": attestation.checkpoints,
            "claims": attestation.claims,
            "trail": trail,
        },
    )
