"""The paper's claimed numbers in an attestation: what the verified runs produced, where each came from
(file, key, the file's digest, the text it was read from), and the checks a reader makes of them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from reprobox.claims import as_number
from reprobox.errors import UsageError
from reprobox.records.attestation import FieldChecker
from reprobox.records.manifest import RunRecord

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
KEPT = ("name", "value", "file", "key", "sha256", "evidence")


def attested_claims(records: Sequence[RunRecord]) -> list[dict[str, Any]] | None:
    """The first run's claims (every run must agree: they are values the job saved); None when the job
    file claims nothing."""
    first = records[0]
    if not first.claims:
        return None
    for record in records[1:]:
        for claim in first.claims:
            other = record.claim(str(claim.get("name")))
            if other is None or other.get("value") != claim.get("value"):
                raise UsageError(
                    f"runs {first.run_dir} and {record.run_dir} claim different values of "
                    f"{claim.get('name')} ({claim.get('value')} vs {other and other.get('value')}); "
                    "only reproducible results can be attested"
                )
    return [{key: claim.get(key) for key in KEPT} for claim in first.claims]


def check_claims(checker: FieldChecker, claims: Any) -> None:
    """Optional (attestations of jobs without claims, and older ones, lack it); a value that does not
    match the text it was read from was edited by hand."""
    if claims is None:
        return
    if not isinstance(claims, list):
        checker.fail("predicate.claims", f"must be a list or null, not {type(claims).__name__}")
        return
    for index, claim in enumerate(claims):
        field = f"predicate.claims.{index}"
        if not isinstance(claim, dict):
            checker.fail(field, "must be an object")
            continue
        for key in ("name", "file", "key"):
            checker.get(claim, key, str, f"{field}.{key}")
        value = checker.get(claim, "value", (int, float), f"{field}.value")
        digest = claim.get("sha256")
        if digest is not None and not (isinstance(digest, str) and _HEX64.match(digest)):
            checker.fail(f"{field}.sha256", "must be a sha256 digest (64 lowercase hex digits) or null")
        evidence = claim.get("evidence")
        if value is not None and isinstance(evidence, str) and as_number(evidence) != float(value):
            checker.fail(
                f"{field}.value",
                f"is {value}, but the text it was read from says {evidence!r}; the claim was edited "
                "after the attestation was made: get it again from the author",
            )
