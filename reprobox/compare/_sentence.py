"""The grade of a comparison and the one sentence that leads its verdict: what was excused (run-specific
values, ignored outputs, container bytes, a checkpoint's layout) when the runs reproduced, and the
difference that leads when they did not (tensors before values, since they are the model), saying when a
checkpoint was resharded too, so that a reshard is never read as a change of numbers nor hides one."""

from __future__ import annotations

from reprobox.compare._coverage import equal_text
from reprobox.compare._marks import WHOLE_FILE
from reprobox.compare._model import (
    BIT_IDENTICAL,
    FAILED,
    IDENTICAL,
    NO_VERDICT,
    NOT_REPRODUCIBLE,
    REPRODUCED,
    Comparison,
)
from reprobox.compare._reshard import layout_text


def grade_of(comparison: Comparison) -> tuple[str, str]:
    """The grade and the one sentence that leads the verdict."""
    n = len(comparison.runs)
    if comparison.verdict == FAILED:
        return NO_VERDICT, "no verdict: " + (comparison.notes[0] if comparison.notes else "a run failed")
    if comparison.verdict == IDENTICAL:
        coverage = comparison.coverage
        values_only = coverage is not None and not coverage.holds_tensors  # a tokenizer, a metrics file
        excused = (
            comparison.run_specific or comparison.ignored or comparison.format_only or comparison.resharded
        )
        if not excused:
            what = f" ({coverage.text()})" if coverage is not None and values_only else ""
            return (
                BIT_IDENTICAL,
                f"bit-identical: every output file is byte for byte the same across {n} runs{what}",
            )
        parts = []
        if comparison.run_specific:
            parts.append(f"{_count(len(comparison.run_specific), 'run-specific value')} (listed)")
        if comparison.ignored:
            parts.append(
                f"{_count(len(comparison.ignored), 'value or file', 'values or files')} the job file ignores"
            )
        if comparison.format_only:
            parts.append(f"the container bytes of {_count(len(comparison.format_only), 'file')}")
        if comparison.resharded:
            parts.append(f"the layout of {_resharded(comparison)}")
        equal = equal_text(coverage, f" across {n} runs")
        return REPRODUCED, f"reproduced: {equal}, except {', '.join(parts)}"
    also = f"; {_resharded(comparison)} too" if comparison.resharded else ""
    return NOT_REPRODUCIBLE, "not reproducible: " + _first_difference(comparison) + also


def _first_difference(comparison: Comparison) -> str:
    """The difference that leads the sentence: tensors before values (a checkpoint's path or name, a
    logged duration), since they are the model."""
    tensors = [d for d in comparison.differences if d.get("name") != WHOLE_FILE]
    values = comparison.value_differences
    if tensors:
        first = tensors[0]
        count = comparison.differing_tensor_total
        verb = "differs" if count == 1 else "differ"
        text = f"{_count(count, 'tensor')} {verb} (first: {first['name']} in {first['checkpoint']})"
        if values:
            first = values[0]
            text += f"; {_count(len(values), 'value')} too (first: {first['name']} in {first['checkpoint']})"
        return text
    if values:
        d = values[0]
        more = len(values) - 1
        tail = f" (and {more} more values)" if more else ""
        return f"{d['name']} {d['a']!r} vs {d['b']!r} in {d['checkpoint']}{tail}"
    if comparison.renamed:
        names = "; ".join(f"{r['a']} vs {r['b']}" for r in comparison.renamed[:3])
        return f"the output file names differ ({names}); their contents are equal"
    if comparison.differences:
        return f"{comparison.differences[0]['checkpoint']} differs byte for byte"
    return comparison.notes[0] if comparison.notes else "the runs differ"


def _resharded(comparison: Comparison) -> str:
    """``checkpoint (resharded: 2 shards, 36 chunks vs 1 shard, 18 chunks)``, the first of them (a folder
    per run compared with the reference)."""
    more = len(comparison.resharded) - 1
    return layout_text(comparison.resharded[0]) + (f" and {more} more" if more else "")


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"
