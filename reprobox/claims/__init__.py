"""Claims: the numbers a paper reports (job file `claims:`), read from what a run left
(`extract_claims`) and judged against the published ones (`check_claim`)."""

from reprobox.claims._check import (
    ClaimCheck,
    as_number,
    check_claim,
    criterion,
    judge_recorded,
    recorded_value,
)
from reprobox.claims._extract import ClaimValue, extract_claim, extract_claims

__all__ = [
    "ClaimCheck",
    "ClaimValue",
    "as_number",
    "check_claim",
    "criterion",
    "extract_claim",
    "extract_claims",
    "judge_recorded",
    "recorded_value",
]
