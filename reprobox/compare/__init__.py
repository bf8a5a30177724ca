"""Two run records -> a graded verdict, with every tensor and value that differs, and why.

Grades, one sentence first:

- ``bit-identical``: every compared output file's bytes are equal;
- ``reproduced``: every tensor and every value is equal, except values recognised as run-specific (the
  run's own paths, timestamps, durations, host name: see ``runspecific``) and outputs the job file lists
  under ``compare: {ignore: [...]}``, each listed; also when only a container format's bytes differ;
- ``not reproducible``: any tensor or any other value differs, named with both values;
- ``no verdict``: a run failed, or equal outputs say less than a verdict would claim: nothing compared,
  files that differ in a format reprobox cannot read, or files that hold tensors and none of them
  compared (all ignored or unreadable: see ``_coverage``). A job that saves values and no tensors is
  judged on its values, and its sentence says so.

Hashes find what differs; the values themselves (read from both runs' files at compare time, never
unpickled) say whether it is run-specific and what it was. The JSON ``verdict`` stays ``identical`` /
``different`` / ``failed`` for scripts; ``grade`` and ``sentence`` carry the finer answer; ``compared``
counts what the verdict covers and ``checkpoints`` says what was found in each file (``_table``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from reprobox import codetree, stackdiff, trails
from reprobox.compare import _accounting, _unreadable
from reprobox.compare._coverage import Coverage, coverage_of, equal_text, no_tensor_sentence
from reprobox.compare._marks import WHOLE_FILE
from reprobox.compare._model import (
    BIT_IDENTICAL,
    CLAIMS,
    DIFFERENT,
    EXPLAINED_FIELDS_LIMIT,
    FAILED,
    IDENTICAL,
    NO_VERDICT,
    NOT_REPRODUCIBLE,
    REPRODUCED,
    Comparison,
)
from reprobox.compare._outputs import (
    compare_pair,
)
from reprobox.compare._sentence import grade_of
from reprobox.compare._table import checkpoint_table
from reprobox.compare._tensors import (
    differing_tensor_names,
)
from reprobox.records.manifest import STATUS_CANCELLED, RunRecord
from reprobox.valuetext import show_number

__all__ = [
    "BIT_IDENTICAL",
    "CLAIMS",
    "DIFFERENT",
    "FAILED",
    "IDENTICAL",
    "NOT_REPRODUCIBLE",
    "NO_VERDICT",
    "REPRODUCED",
    "WHOLE_FILE",
    "Comparison",
    "checkpoint_table",
    "closeness",
    "compare_runs",
    "differing_tensor_names",
    "explain_difference",
    "grade_of",
    "input_differences",
]


def compare_runs(records: Sequence[RunRecord], *, tensor_details: bool = True) -> Comparison:
    """Compare every run against the first; the verdict is `identical` only if all match it."""
    comparison = _compare(records, tensor_details)
    comparison.grade, comparison.sentence = grade_of(comparison)
    return comparison


def _compare(records: Sequence[RunRecord], tensor_details: bool) -> Comparison:
    runs = [str(r.run_dir) for r in records]
    failed = [r for r in records if not r.succeeded and r.status != STATUS_CANCELLED]
    if failed:
        notes = [f"run {r.run_dir} {r.status}: {r.failure or 'no reason recorded'}" for r in failed]
        return Comparison(FAILED, runs, notes=notes, checkpoints=checkpoint_table(records))
    comparison = Comparison(IDENTICAL, runs, checkpoints=checkpoint_table(records))
    if any(_judged_by_trail(r) for r in records):
        _compare_trails(records, comparison)
        return comparison
    reference = records[0]
    if not reference.checkpoints:
        comparison.verdict = FAILED
        comparison.notes.append(
            "the job wrote no checkpoints matching its 'checkpoints' patterns, so there is nothing "
            "to compare; "
            "write them to $REPROBOX_OUTPUT_DIR"
        )
        return comparison
    for other in records[1:]:
        before = comparison.verdict
        compare_pair(reference, other, comparison, tensor_details)
        _compare_claims(reference, other, comparison)
        if before == IDENTICAL and comparison.verdict == DIFFERENT:
            comparison.first_divergence = _trail_divergence(reference, other)
            comparison.explanation = explain_difference(reference, other, closeness(comparison))
            _unknown_cause(comparison)
    if comparison.verdict == IDENTICAL:
        _compare_computation(records, comparison)
    comparison.checkpoints = checkpoint_table(records, comparison)
    coverage = comparison.coverage = coverage_of(records, comparison.checkpoints, comparison.unreadable)
    if comparison.verdict == IDENTICAL:
        no_verdict = _beyond_what_was_compared(comparison, coverage)
        if no_verdict is not None:
            comparison.verdict = FAILED
            comparison.notes.insert(0, no_verdict)
    return comparison


def _beyond_what_was_compared(comparison: Comparison, coverage: Coverage | None) -> str | None:
    """Why equal outputs still give no verdict, or None: a verdict claims no more than was compared."""
    if coverage is not None and coverage.no_tensor_compared and coverage.files:
        return no_tensor_sentence(coverage, comparison.unreadable)
    if comparison.unreadable:
        equal = equal_text(coverage, "")
        if coverage is not None and not coverage.files:
            equal = "no other file was compared"
        return _unreadable.sentence(comparison.unreadable, equal)
    if not comparison.compared_files:
        return _nothing_compared(comparison)
    return None


def _unknown_cause(comparison: Comparison) -> None:
    """What differs is only checkpoints reprobox cannot read: on the same stack that is no proof of a
    real nondeterminism (it may be a stamp inside the file), and the explanation says so."""
    explanation = comparison.explanation
    unread, read = _accounting.unread_and_read(comparison.differences, comparison.value_differences)
    readable = read or comparison.one_sided or comparison.renamed
    if explanation and explanation.get("same_stack") and unread and not readable:
        explanation["sentence"] = (
            "same stack; what differs cannot be read, so it is not known whether the runs computed "
            "differently or only stamped the file differently"
        )


def _nothing_compared(comparison: Comparison) -> str:
    """No output was compared at all: every one ignored by the job file (or none left)."""
    ignored = sorted({str(item.get("checkpoint")) for item in comparison.ignored})
    listed = f" ({', '.join(ignored[:5])}{' ...' if len(ignored) > 5 else ''})" if ignored else ""
    return (
        f"nothing was compared: every output the runs wrote is ignored by the job file{listed}; a verdict "
        "needs at least one file compared: narrow compare: ignore, or save the model"
    )


def _compare_computation(records: Sequence[RunRecord], out: Comparison) -> None:
    """Equal outputs from runs whose trails differ mid-run (a loss, a parameter on the way): the job
    computed differently, and only this time did the difference round away before what it saved."""
    for other in records[1:]:
        divergence = _trail_divergence(records[0], other)
        if divergence is None:
            continue
        out.verdict = DIFFERENT
        out.first_divergence = divergence
        out.explanation = explain_difference(records[0], other, None)
        out.notes.insert(0, _computation_sentence(divergence))
        return


def _computation_sentence(divergence: dict[str, Any]) -> str:
    return (
        f"{divergence_text(divergence)} although every saved value is equal: the job computes "
        "nondeterministically, and this time the difference did not reach what it saved"
    )


def divergence_text(divergence: dict[str, Any]) -> str:
    """What differs at a trail's first diverging step, in a few words."""
    step = divergence["step"]
    if divergence.get("parameters"):
        return f"{len(divergence['parameters'])} parameters differ at step {step}"
    a, b = (dict(map(tuple, divergence["loss"][side])).get(step) for side in ("a", "b"))
    return f"the loss at step {step} differs ({a!r} vs {b!r})"  # every digit: such losses differ late


def _compare_claims(a: RunRecord, b: RunRecord, out: Comparison) -> None:
    """The claimed numbers are values the job saved: one that differs makes the runs differ, even when
    the file it came from is not a checkpoint (a metrics file, the log)."""
    for mine in a.claims:
        theirs = b.claim(str(mine.get("name")))
        value_b = theirs.get("value") if theirs else None
        if theirs is not None and value_b == mine.get("value"):
            continue
        out.verdict = DIFFERENT
        out.value_differences.append(
            {
                "checkpoint": CLAIMS,
                "name": str(mine.get("name")),
                "a": mine.get("value"),
                "b": value_b,
                "note": f"the claimed number, read from {mine.get('file')} at {mine.get('key')!r}",
            }
        )


def closeness(comparison: Comparison) -> str | None:
    """ "max abs difference X over Y tensors", from the tensor statistics, for the stack sentence."""
    # JSON spells NaN and the infinities as text ("nan", "inf"): float() reads both spellings
    values = [float(d["max_abs"]) for d in comparison.differences if d.get("max_abs") is not None]
    if not values:
        return None
    worst = math.nan if any(math.isnan(v) for v in values) else max(values)
    return f"max abs difference {show_number(worst)} over {comparison.differing_tensor_total} tensors"


def explain_difference(a: RunRecord, b: RunRecord, closeness_text: str | None) -> dict[str, Any]:
    """Why two runs differ: different inputs (seed, code, job settings), a different stack (so bitwise
    equality was never expected), or neither (a real nondeterminism)."""
    diffs = stackdiff.diff_fingerprints(a.fingerprint, b.fingerprint)
    numerics = [d for d in diffs if d.affects_numerics]
    inputs = input_differences(a, b)
    sentence = stackdiff.stack_verdict(diffs, closeness=closeness_text)
    if inputs:
        suffix = f" ({closeness_text})" if closeness_text else ""
        sentence = f"different inputs: {'; '.join(inputs)}; the runs were not expected to match{suffix}"
    return {
        "same_stack": not numerics,
        "same_inputs": not inputs,
        "inputs": inputs,
        "sentence": sentence,
        "fields": [
            {"field": d.field, "label": d.label, "a": d.a, "b": d.b, "affects_numerics": d.affects_numerics}
            for d in diffs[:EXPLAINED_FIELDS_LIMIT]
        ],
        # what a person reads: the per-rank copies of a multi-rank run count in neither
        "differing_fields": sum(not stackdiff.is_per_rank(d.field) for d in diffs),
        "equal_fields": len(stackdiff.equal_fields(a.fingerprint, b.fingerprint, diffs)),
    }


def input_differences(a: RunRecord, b: RunRecord) -> list[str]:
    """What the user changed between the runs, as short phrases: seed, code, job settings, image."""
    found = []
    if a.seed != b.seed:
        found.append(f"seed {a.seed} vs {b.seed}")
    if a.code_sha256 != b.code_sha256:
        changes = codetree.changed_files(a.code_files, b.code_files)
        named = [*changes["changed"], *changes["added"], *changes["removed"]]
        found.append(
            "code "
            + (", ".join(named[:5]) if named else "tree")
            + (" differ" if len(named) != 1 else " differs")
        )
    # Determinism flags and thread counts are left to the fingerprint: they are part of the stack.
    for key in ("env", "command", "launcher"):
        if a.job_spec.get(key) != b.job_spec.get(key):
            found.append(f"job {key}")
    if a.image_id != b.image_id:
        found.append("image" if a.image_id and b.image_id else "runtime (container vs local)")
    return found


def _judged_by_trail(record: RunRecord) -> bool:
    """Prefix checks and runs stopped at a divergence have no final checkpoints: their trails decide."""
    return record.stopped_short or record.status == STATUS_CANCELLED


def _compare_trails(records: Sequence[RunRecord], out: Comparison) -> None:
    reference = trails.trail_of(records[0])
    if reference is None:
        out.verdict = FAILED
        out.notes.append("the runs stopped early but the reference has no trail to compare")
        return
    for other in records[1:]:
        trail = trails.trail_of(other)
        if trail is None:
            out.verdict = FAILED
            out.notes.append(f"run {other.run_dir} has no trail to compare")
            continue
        divergence = trails.first_divergence(reference, trail)
        if divergence is not None:
            if out.first_divergence is None:
                out.first_divergence = divergence
                out.explanation = explain_difference(records[0], other, None)
                out.notes.insert(0, divergence_text(divergence))
            out.verdict = DIFFERENT
            continue
        same, _last = trails.common_prefix_identical(reference, trail)
        if not same and out.verdict == IDENTICAL:
            out.verdict = FAILED
            out.notes.append(f"run {other.run_dir} recorded no optimizer step in common with the reference")
    prefix = records[0].prefix_check
    if prefix and out.verdict == IDENTICAL:
        out.notes.append(f"prefix check: the first {prefix['max_steps']} optimizer steps are bit-identical")


def _trail_divergence(a: RunRecord, b: RunRecord) -> dict[str, Any] | None:
    ta, tb = trails.trail_of(a), trails.trail_of(b)
    if ta is None or tb is None:
        return None
    return trails.first_divergence(ta, tb)
