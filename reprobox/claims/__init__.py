"""Claims: the numbers a paper reports (job file `claims:`), read from what a run left
(`extract_claims`) and judged against the published ones (`check_claim`)."""

from reprobox.claims._check import ClaimCheck, check_claim, criterion, judge_recorded
from reprobox.claims._extract import ClaimValue, extract_claim, extract_claims

__all__ = [
    "ClaimCheck",
    "ClaimValue",
    "check_claim",
    "criterion",
    "extract_claim",
    "extract_claims",
    "judge_recorded",
]
