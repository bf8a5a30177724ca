"""The variation matrix: per factor, invariant, sensitive (and to what), unsupported or failed; and the
verdict sentence that leads it, naming the sensitive factors and what to pin."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from reprobox.compare import DIFFERENT, FAILED, IDENTICAL, WHOLE_FILE, Comparison

INVARIANT = "invariant"
SENSITIVE = "sensitive"
UNSUPPORTED = "unsupported"
FAILED_RUN = "failed"
UNDECIDED = "undecided"  # the baseline differed from itself: nothing can be attributed to a factor
NAMES_LIMIT = 10
TOP_LEVEL = "(the top-level value)"


@dataclass
class FactorResult:
    """One row of the matrix."""

    factor: str
    status: str
    values: str  # the documented pair
    baseline: str = ""  # the baseline's value, as run
    varied: str = ""  # the varied value, as run
    reason: str = ""  # why unsupported or failed
    pin: str = ""  # what pins it, for a sensitive factor
    run: str | None = None  # the varied run's directory
    sentence: str = ""  # the comparison's own sentence
    files: list[str] = field(default_factory=list)
    tensors: list[str] = field(default_factory=list)
    values_changed: list[str] = field(default_factory=list)
    max_abs: float | None = None
    first_step: int | None = None
    only_baseline: list[str] = field(default_factory=list)  # files only the baseline wrote
    only_varied: list[str] = field(default_factory=list)  # files only the varied run wrote (rank-3.pt)
    note: str = ""  # what kind of difference, where the comparison alone would excuse it
    applicable: bool = True  # False: the factor does not apply to this job (not the runtime's fault)

    def to_json(self) -> dict[str, Any]:
        return {
            "factor": self.factor,
            "status": self.status,
            "values": self.values,
            "baseline": self.baseline,
            "varied": self.varied,
            "reason": self.reason,
            "pin": self.pin,
            "run": self.run,
            "sentence": self.sentence,
            "files": self.files,
            "tensors": self.tensors,
            "values_changed": self.values_changed,
            "max_abs": self.max_abs,
            "first_diverging_step": self.first_step,
            "only_in_baseline": self.only_baseline,
            "only_in_varied": self.only_varied,
            "note": self.note,
        }


def excused(comparison: Comparison) -> frozenset[tuple[str, str]]:
    """The values and files a comparison excused as run-specific, as container bytes only, or as a
    checkpoint's layout (a DCP folder resharded: its index stands for it)."""
    values = {(str(d.get("checkpoint")), str(d.get("name"))) for d in comparison.run_specific}
    indexes = (f"{r['checkpoint']}/.metadata".removeprefix("./") for r in comparison.resharded)
    resharded = {(path, WHOLE_FILE) for path in indexes}
    return frozenset(values | resharded | {(path, WHOLE_FILE) for path in comparison.format_only})


def judge(
    result: FactorResult, comparison: Comparison, noise: frozenset[tuple[str, str]] = frozenset()
) -> FactorResult:
    """Fill a row from the comparison of its varied run with the baseline.

    `noise` is what the baseline's own rerun already changed. A value the comparison excuses as
    run-specific (a formatted time, a path) that the baseline kept equal changed because of the factor:
    the factor is sensitive, in bytes rather than tensors.
    """
    result.sentence = comparison.sentence
    if comparison.verdict == FAILED:
        result.status = FAILED_RUN
        result.reason = comparison.notes[0] if comparison.notes else "the varied run failed"
        return result
    if comparison.verdict == IDENTICAL:
        moved = sorted(excused(comparison) - noise)
        if not moved:
            result.status = INVARIANT
            return result
        result.status = SENSITIVE
        result.files = sorted({path for path, _name in moved})
        result.values_changed = _names(_value_name(name) for _path, name in moved if name != WHOLE_FILE)
        result.note = (
            "bytes, not tensors: values a plain verify excuses as run-specific (times, paths, names), "
            "container bytes or a checkpoint's layout (resharded) changed, and the baseline kept them equal"
        )
        return result
    result.status = SENSITIVE
    differing = comparison.differences + comparison.value_differences
    reference = comparison.runs[0] if comparison.runs else None
    one_sided = [(str(d["checkpoint"]), d["run"] == reference) for d in comparison.one_sided]
    result.only_baseline = sorted(path for path, in_baseline in one_sided if in_baseline)
    result.only_varied = sorted(path for path, in_baseline in one_sided if not in_baseline)
    changed = {str(d["checkpoint"]) for d in differing if d.get("checkpoint")}
    result.files = sorted(changed | {path for path, _in_baseline in one_sided})
    result.tensors = _names(d["name"] for d in comparison.differences if d.get("name") != WHOLE_FILE)
    result.values_changed = _names(_value_name(str(d["name"])) for d in comparison.value_differences)
    maxima = [float(d["max_abs"]) for d in comparison.differences if d.get("max_abs") is not None]
    result.max_abs = max(maxima) if maxima else None
    step = (comparison.first_divergence or {}).get("step")
    result.first_step = int(step) if isinstance(step, int) else None
    if result.tensors == [] and (result.values_changed or differing or comparison.one_sided):
        result.note = "bytes, not tensors: values or files changed, no tensor did"
    return result


def _value_name(name: str) -> str:
    """A saved value's key path; a file that holds one plain value has none."""
    return name or TOP_LEVEL


def _names(names: Iterable[object]) -> list[str]:
    """Each name once, in the order first seen (the same tensor or value can change in several files)."""
    return list(dict.fromkeys(str(name) for name in names))[:NAMES_LIMIT]


@dataclass
class VariationResult:
    """The whole answer of `verify --vary`."""

    baseline_runs: list[str]
    baseline: Comparison  # the baseline against its own rerun
    rows: list[FactorResult]
    combination: list[str] | None = None  # the smallest combination that differs, when no single one does
    combination_row: FactorResult | None = None
    runtime: str = ""

    @property
    def baseline_reproducible(self) -> bool:
        return self.baseline.verdict == IDENTICAL

    def status_of(self, status: str) -> list[FactorResult]:
        return [row for row in self.rows if row.status == status]

    @property
    def sensitive(self) -> bool:
        return (
            bool(self.status_of(SENSITIVE))
            or self.combination is not None
            or self.baseline.verdict == DIFFERENT
        )

    @property
    def failed(self) -> bool:
        return self.baseline.verdict == FAILED or bool(self.status_of(FAILED_RUN))

    def sentence(self) -> str:
        """One sentence first: what matters and what to pin, then what was shown not to matter."""
        if self.baseline.verdict == FAILED:
            return f"no verdict: the baseline failed ({self.baseline.sentence})"
        if self.baseline.verdict == DIFFERENT:
            return (
                "no factor can be blamed: the baseline is not reproducible by itself "
                f"({self.baseline.sentence}); make plain `reprobox verify` pass first"
            )
        parts = [f"sensitive to {row.factor}: {row.pin}" for row in self.status_of(SENSITIVE)]
        if self.combination is not None:
            parts.append(
                f"sensitive to the combination {' + '.join(self.combination)} "
                "(no one of them alone changes the result): pin each"
            )
        invariant = [row.factor for row in self.status_of(INVARIANT)]
        if invariant:
            parts.append(f"invariant to {', '.join(invariant)}")
        failed = [f"{row.factor} ({row.varied}; {row.reason})" for row in self.status_of(FAILED_RUN)]
        if failed:
            parts.append(f"the varied run failed for {', '.join(failed)}")
        unsupported = [f"{row.factor} ({row.reason})" for row in self.status_of(UNSUPPORTED)]
        if unsupported:
            parts.append(f"not varied: {', '.join(unsupported)}")
        return "; ".join(parts) or "nothing was varied"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "sentence": self.sentence(),
            "runtime": self.runtime,
            "baseline": {
                "runs": self.baseline_runs,
                "reproducible": self.baseline_reproducible,
                "sentence": self.baseline.sentence,
            },
            "factors": [row.to_json() for row in self.rows],
            "invariant": [row.factor for row in self.status_of(INVARIANT)],
            "sensitive": [row.factor for row in self.status_of(SENSITIVE)],
            "unsupported": [row.factor for row in self.status_of(UNSUPPORTED)],
            "failed": [row.factor for row in self.status_of(FAILED_RUN)],
        }
        if self.combination is not None:
            data["combination"] = {
                "factors": self.combination,
                "result": self.combination_row.to_json() if self.combination_row else None,
            }
        return data
