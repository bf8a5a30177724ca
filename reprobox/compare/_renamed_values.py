"""Values whose names hold their run's own facts, paired across two runs and judged by their content.

A value's name can carry what names the run: tensorboardX's ``export_scalars_to_json`` keys each series
by its log folder, ``runs/<date>_<host>/...``, so every key of one run is absent from the other's. Two
names present in one run only are the same value when each, masked with its own run's facts (its clock
readings, hosts, paths, run id, drawn ids), is the same as the other and no other name of either run
masks the same: the name is excused by that record, as a file's name is, and the content is still
compared. Anything else stays present in one run only.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from reprobox.runspecific import RunContext, judge_value, mask, unexplained_duration

UNREADABLE = "the values could not be read back from both runs' files"


@dataclass(frozen=True)
class Renamed:
    """Run b's name for a value of run a, and why the names differ (run-specific parts masked)."""

    key_b: str
    why: str


@dataclass(frozen=True)
class Judged:
    """A renamed value's finding: run-specific (``excused``, with its reason) or a real difference."""

    excused: bool
    a: object
    b: object
    reason: str


def renamed_values(
    only_a: Collection[str], only_b: Collection[str], contexts: tuple[RunContext, RunContext]
) -> dict[str, Renamed]:
    """Run a's names present in one run only -> run b's name for the same value, paired by masking."""
    if not only_a or not only_b:
        return {}
    masked_a, masked_b = _unique_masked(only_a, contexts[0]), _unique_masked(only_b, contexts[1])
    paired: dict[str, Renamed] = {}
    for masked, (key_a, why_a) in masked_a.items():
        if masked in masked_b and (why_a or masked_b[masked][1]):
            key_b, why_b = masked_b[masked]
            paired[key_a] = Renamed(key_b, " and ".join(sorted(why_a | why_b)))
    return paired


def judge_renamed(
    key_a: str,
    renamed: Renamed,
    same_content: bool,
    values: tuple[Mapping[str, object] | None, Mapping[str, object] | None],
    contexts: tuple[RunContext, RunContext],
) -> Judged:
    """The value under its two names: equal content, or content its runs' records explain, is
    run-specific by its name; other content is a real difference, said with both names."""
    name_reason = f"value name: {renamed.why}"
    if same_content:
        return Judged(True, key_a, renamed.key_b, name_reason)
    values_a, values_b = values
    if values_a is None or values_b is None or key_a not in values_a or renamed.key_b not in values_b:
        return Judged(False, "<unavailable>", "<unavailable>", UNREADABLE)
    va, vb = values_a[key_a], values_b[renamed.key_b]
    excuse = judge_value(key_a, va, vb, *contexts, names=values_a)
    if excuse is not None:
        return Judged(True, va, vb, f"{name_reason}; its value: {excuse.reason}")
    why = unexplained_duration(key_a, values_a)
    named = f"named {renamed.key_b} in the other run ({renamed.why})"
    return Judged(False, va, vb, f"{why}; {named}" if why else named)


def _unique_masked(keys: Collection[str], context: RunContext) -> dict[str, tuple[str, set[str]]]:
    """Masked name -> (name, why), for the names no other name of the run masks to."""
    found: dict[str, list[tuple[str, set[str]]]] = {}
    for key in keys:
        masked, why = mask(key, context)
        found.setdefault(masked, []).append((key, why))
    return {masked: group[0] for masked, group in found.items() if len(group) == 1}
