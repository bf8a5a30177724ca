"""The reproduction's grade: the highest rung that holds, from the bits to the paper's numbers.

    bit-identical > tensors-equal > within-tolerance > claims-hold > not-reproduced

The bits decide the verdict and, by default, the exit code, as before. The claims add the rung a
reviewer on another stack can reach: every number the paper reports (the job file's `claims:`) came
out within its tolerance. A claim that fails is never papered over: a rung below bit-identical holds
only when every claim holds too. `accept: claims` (job file) or `--accept claims` makes "every claim
holds" exit 0 on a different stack, saying plainly that the bits differ and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reprobox.claims import ClaimCheck, as_number, check_claim, recorded_value
from reprobox.errors import EXIT_NOT_REPRODUCIBLE, EXIT_OK
from reprobox.jobfile import Claim
from reprobox.records.manifest import RunRecord
from reprobox.reproduce._model import (
    BIT_IDENTICAL,
    DIFFERENT_STACK,
    NONDETERMINISTIC,
    REPRODUCED,
    Context,
    ReproduceResult,
)

GRADE_BIT_IDENTICAL = "bit-identical"
GRADE_TENSORS_EQUAL = "tensors-equal"
GRADE_WITHIN_TOLERANCE = "within-tolerance"
GRADE_CLAIMS_HOLD = "claims-hold"
GRADE_NOT_REPRODUCED = "not-reproduced"
GRADES = (
    GRADE_BIT_IDENTICAL,
    GRADE_TENSORS_EQUAL,
    GRADE_WITHIN_TOLERANCE,
    GRADE_CLAIMS_HOLD,
    GRADE_NOT_REPRODUCED,
)
LISTED_CLAIMS = 4


def grade(
    ctx: Context, claims: tuple[Claim, ...], records: Sequence[RunRecord], result: ReproduceResult
) -> None:
    """Set the grade, the rungs, the claim checks; lead the sentence with the grade; settle the exit code."""
    checks, altered = _claim_checks(ctx, claims, records)
    result.claims = [c.to_json() for c in checks]
    claims_hold = None if not checks else all(c.holds for c in checks)
    if claims and not ctx.attestation.claims:
        ctx.notes.append(
            "the job file claims numbers but the attestation records none (made before claims, or from "
            "another job file): the claims are reported here but not compared with published values"
        )
    bits = result.verdict in (BIT_IDENTICAL, REPRODUCED)
    tolerance_met = None if ctx.options.tolerance is None else result.within_tolerance
    rungs = {
        GRADE_BIT_IDENTICAL: result.verdict == BIT_IDENTICAL,
        GRADE_TENSORS_EQUAL: bits,
        GRADE_WITHIN_TOLERANCE: tolerance_met,
        GRADE_CLAIMS_HOLD: claims_hold,
    }
    result.grades = rungs
    failing = [c for c in checks if not c.holds]
    if altered:
        result.grade, result.exit_code = GRADE_NOT_REPRODUCED, EXIT_NOT_REPRODUCIBLE
        result.sentence = f"not reproduced: {altered}"
        return
    if failing:
        result.grade, result.exit_code = GRADE_NOT_REPRODUCED, EXIT_NOT_REPRODUCIBLE
        result.sentence = f"not reproduced: {_listing(failing)}; {result.sentence}"
        return
    if rungs[GRADE_BIT_IDENTICAL] or rungs[GRADE_TENSORS_EQUAL]:
        result.grade = GRADE_BIT_IDENTICAL if rungs[GRADE_BIT_IDENTICAL] else GRADE_TENSORS_EQUAL
        if claims_hold:
            result.sentence += f"; every claim holds ({_names(checks)})"
        return
    if tolerance_met:
        result.grade = GRADE_WITHIN_TOLERANCE
        if claims_hold:
            result.sentence += f"; every claim holds ({_names(checks)})"
        return
    if claims_hold:
        result.grade = GRADE_CLAIMS_HOLD
        accepted = _accept(ctx) == "claims" and result.verdict == DIFFERENT_STACK
        result.sentence = f"every claim holds ({_names(checks)}), but the bits differ: {result.sentence}"
        if accepted:
            result.exit_code = EXIT_OK
        elif result.verdict == DIFFERENT_STACK:
            ctx.notes.append(
                "every claim holds on this stack: pass --accept claims (or set `accept: claims` in the job "
                "file) to have that exit 0"
            )
        elif result.verdict == NONDETERMINISTIC:
            ctx.notes.append(
                "the claims hold, but on the same stack the bits were expected to match: the job is "
                "nondeterministic, so --accept claims does not pass it"
            )
        return
    result.grade = GRADE_NOT_REPRODUCED


def _accept(ctx: Context) -> str:
    return ctx.options.accept or ctx.accept or "bits"


def _claim_checks(
    ctx: Context, claims: tuple[Claim, ...], records: Sequence[RunRecord]
) -> tuple[list[ClaimCheck], str | None]:
    """Each claim checked in every run here (the first failing run speaks for it), and a sentence when
    the attestation's recorded value cannot be what its own source file held."""
    published = {str(c.get("name")): c for c in ctx.attestation.claims}
    checks: list[ClaimCheck] = []
    altered = None
    for claim in claims:
        author = published.get(claim.name)
        if author is None:
            continue
        author_value = as_number(author.get("value"))
        judged = [check_claim(claim, author_value, recorded_value(r, claim.name)) for r in records]
        checks.append(next((c for c in judged if not c.holds), judged[0]))
        altered = altered or _altered(claim, author, records)
    return checks, altered


def _altered(claim: Claim, author: dict[str, Any], records: Sequence[RunRecord]) -> str | None:
    """The same source file (same digest) cannot hold two values: the attestation's was edited."""
    for record in records:
        mine = record.claim(claim.name) or {}
        digest = author.get("sha256")
        if digest and mine.get("sha256") == digest and mine.get("value") != author.get("value"):
            return (
                f"the attestation's {claim.name} is {author.get('value')}, but {claim.file}, whose digest "
                f"matches the attested one, holds {mine.get('value')}: the recorded claim was edited "
                "after the runs"
            )
    return None


def _names(checks: Sequence[ClaimCheck]) -> str:
    """`val_acc, val_loss`: each claim's numbers follow on lines of their own (and in --json)."""
    return ", ".join(c.name for c in checks)


def _listing(checks: Sequence[ClaimCheck]) -> str:
    shown = "; ".join(c.sentence() for c in checks[:LISTED_CLAIMS])
    more = len(checks) - LISTED_CLAIMS
    return shown + (f"; and {more} more claims (--json lists every one)" if more > 0 else "")
