"""Whether a claim holds: the reproduced number against the published one (within the tolerance) and
against the claim's own bounds (at_least / at_most)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reprobox.jobfile import Claim
from reprobox.records.run import RunRecord


@dataclass(frozen=True)
class ClaimCheck:
    """One claim judged: both numbers, the difference, what was allowed, and whether it holds."""

    name: str
    published: float | None
    reproduced: float | None
    difference: float | None
    allowed: str  # the criterion in words: "±0.01", "±1% (0.00975)", ">= 0.97"
    holds: bool
    reason: str | None = None  # why it does not hold

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "published": _finite(self.published),
            "reproduced": _finite(self.reproduced),
            "difference": _finite(self.difference),
            "allowed": self.allowed,
            "holds": self.holds,
            "reason": self.reason,
        }

    def sentence(self) -> str:
        """`val_acc 0.975 (published 0.98, allowed ±0.01)`, with why when it does not hold."""
        details = [f"published {show(self.published)}"] if self.published is not None else []
        details.append(f"allowed {self.allowed}" + ("" if self.holds else f": {self.reason}"))
        return f"{self.name} {show(self.reproduced)} ({', '.join(details)})"


def criterion(claim: Claim, published: float | None) -> str:
    parts = []
    if claim.tolerance is not None:
        if claim.relative:
            absolute = f" = {show(claim.tolerance * abs(published))}" if published is not None else ""
            parts.append(f"±{show(claim.tolerance * 100)}%{absolute}")
        else:
            parts.append(f"±{show(claim.tolerance)}")
    if claim.at_least is not None:
        parts.append(f">= {show(claim.at_least)}")
    if claim.at_most is not None:
        parts.append(f"<= {show(claim.at_most)}")
    return ", ".join(parts)


def check_claim(claim: Claim, published: float | None, reproduced: float | None) -> ClaimCheck:
    """The claim judged on a reproduction; `published` None checks the bounds alone (the author's run)."""
    allowed = criterion(claim, published)
    if reproduced is None:
        return ClaimCheck(claim.name, published, None, None, allowed, False, "no value was produced")
    if math.isnan(reproduced):
        return ClaimCheck(claim.name, published, reproduced, None, allowed, False, "the value is NaN")
    difference = None if published is None else reproduced - published
    reason = _bounds_broken(claim, reproduced)
    if reason is None and claim.tolerance is not None and published is not None:
        limit = claim.tolerance * abs(published) if claim.relative else claim.tolerance
        if difference is None or math.isnan(difference) or abs(difference) > limit:
            off = show(abs(difference)) if difference is not None else "NaN"
            reason = f"off by {off}, more than {show(limit)}"
    return ClaimCheck(claim.name, published, reproduced, difference, allowed, reason is None, reason)


def _bounds_broken(claim: Claim, value: float) -> str | None:
    if claim.at_least is not None and not value >= claim.at_least:
        return f"below at_least {show(claim.at_least)}"
    if claim.at_most is not None and not value <= claim.at_most:
        return f"above at_most {show(claim.at_most)}"
    return None


def as_number(value: Any) -> float | None:
    """A claimed value as a finite number: a number, or text such as "0.975" or "97.5%"; else None."""
    if isinstance(value, bool):
        return None
    number: float | None = None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip().rstrip("%"))
        except ValueError:
            return None
    return number if number is not None and math.isfinite(number) else None


def recorded_value(record: RunRecord, name: str) -> float | None:
    """The value a run recorded for a claim, or None when it produced none."""
    return as_number((record.claim(name) or {}).get("value"))


def show(value: float | None) -> str:
    if value is None:
        return "none"
    return f"{value:.6g}"


def _finite(value: float | None) -> float | str | None:
    return value if value is None or math.isfinite(value) else repr(value)


def judge_recorded(claims: tuple[Claim, ...], recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's claims as `run` and `verify` report them: the value, where it came from, the criterion a
    reproduction must meet, and whether the claim's own bounds (at_least / at_most) hold already."""
    found = {str(c.get("name")): c for c in recorded}
    judged = []
    for claim in claims:
        entry = found.get(claim.name)
        if entry is None:
            continue
        value = entry.get("value")
        number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        broken = _bounds_broken(claim, number) if number is not None else entry.get("error")
        judged.append(
            {
                **entry,
                "criterion": criterion(claim, number),
                "bounds_hold": broken is None,
                "problem": broken,
            }
        )
    return judged
