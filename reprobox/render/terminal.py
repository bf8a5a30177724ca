"""Run records and comparisons as terminal text (the report documents are in `document`, `markdown`
and `html`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from reprobox.records.manifest import RunRecord
from reprobox.stackdiff import is_per_rank
from reprobox.valuetext import show_number, show_value

if TYPE_CHECKING:  # `run` prints a run summary without loading the comparison machinery
    from reprobox.compare import Comparison

VERDICT_SENTENCES = {
    "identical": "reproduced: every checkpoint is bit-identical across {n} runs",
    "different": "checkpoints differ between runs",
    "failed": "no verdict: a run failed or produced nothing to compare",
}
LISTED_VALUES = 20
SERIES_AT = 4  # values of one series (a tag's steps, a column's rows) that differing make one line
ROW_MARKS = {  # a checkpoint row's status (compare._table) as its mark
    "same": "same",
    "equal": "equal",
    "run-specific": "run-specific",
    "resharded": "resharded",
    "in database": "in database",
    "ignored": "ignored",
    "unreadable": "unread",
    "differs": "DIFF",
    "missing": "missing",
}
ROW_NOTES = {
    "equal": "  (same tensors and values, other file bytes)",
    "resharded": "  (same tensors by name, cut into other shards)",
    "in database": "  (a data file of a database, compared through its keys)",
    "unreadable": "  (differs; reprobox cannot read its format)",
}
LISTED_FIELDS = 12


def short(digest: str | None, length: int = 16) -> str:
    return digest[:length] if digest else "-"


def run_summary(record: RunRecord) -> str:
    lines = [f"{record.status}: {record.run_dir}"]
    if record.failure:
        lines.append(f"  reason: {record.failure}")
    for checkpoint in record.checkpoints:
        tensors = len(checkpoint.get("tensors") or [])
        detail = f"{tensors} tensors" if tensors else checkpoint.get("format", "file")
        lines.append(f"  {checkpoint['path']}  content {short(checkpoint.get('content_sha256'))}  ({detail})")
    if record.succeeded and not record.checkpoints:
        lines.append("  no checkpoints: write them to $REPROBOX_OUTPUT_DIR to have them hashed")
    return "\n".join(lines)


def claim_lines(judged: Sequence[dict[str, Any]]) -> list[str]:
    """`claim val_acc = 0.975  (metrics.json: val_acc; a reproduction must come within ±0.01)`."""
    lines = []
    for claim in judged:
        source = f"{claim.get('file')}: {claim.get('key')}"
        if claim.get("value") is None:
            lines.append(f"  claim {claim.get('name')}: {claim.get('error') or 'no value'}")
            continue
        lines.append(
            f"  claim {claim.get('name')} = {claim['value']:.6g}  ({source}; "
            f"a reproduction must meet {claim.get('criterion')})"
        )
        if not claim.get("bounds_hold"):
            lines.append(f"    does not hold even here: {claim.get('problem')}")
    return lines


def comparison_text(comparison: Comparison) -> str:
    n = len(comparison.runs)
    lines = [comparison.sentence or VERDICT_SENTENCES.get(comparison.verdict, comparison.verdict).format(n=n)]
    if comparison.explanation and comparison.explanation.get("sentence"):
        lines.append(f"  {comparison.explanation['sentence']}")
        lines.extend(stack_lines(comparison.explanation))
    for run in comparison.runs:
        lines.append(f"  run {run}")
    lines.extend(checkpoint_lines(comparison.checkpoints))
    if comparison.differences:
        lines.append(_difference_table(comparison.differences, comparison.differing_tensor_total))
    lines.extend(_value_lines("value differs", comparison.value_differences, "note"))
    lines.extend(excused_lines(comparison))
    for renamed in comparison.renamed:
        lines.append(f"  file names differ: {renamed['a']} vs {renamed['b']} (same content)")
    if comparison.first_divergence:
        first = comparison.first_divergence
        differing = first.get("parameters", [])[:8] or [f"the {name}" for name in first.get("values", [])]
        lines.append(f"  first divergence {divergence_text(first)}: {', '.join(differing)}")
        lines.extend(operation_lines(first))
    lines.extend(f"  note: {note}" for note in comparison.notes if not lines[0].endswith(note))  # not twice
    return "\n".join(lines)


def checkpoint_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per output file: what the comparison found in it, its name in each run where the runs
    named it differently, and its content hash in each run."""
    marks = [
        ROW_MARKS.get(str(row.get("status")), "same" if row.get("identical") else "DIFF") for row in rows
    ]
    width = max((len(mark) for mark in marks), default=0) + 2
    lines = []
    for row, mark in zip(rows, marks, strict=True):
        hashes = " ".join(short(r["content_sha256"], 12) for r in row["runs"])
        names = [str(r["path"]) for r in row["runs"] if r.get("path") and r["path"] != row["path"]]
        named = f"  (also named {', '.join(dict.fromkeys(names))})" if names else ""
        why = ROW_NOTES.get(str(row.get("status")), "")
        lines.append(f"  {f'[{mark}]':<{width}} {row['path']}{named}  {hashes}{why}")
    return lines


def excused_lines(comparison: Comparison) -> list[str]:
    """Run-specific values by kind, with counts and one example each, and what the job file ignores by
    rule: a short job's hundreds of excused values read as a few lines (--json lists every one)."""
    from reprobox.compare import WHOLE_FILE
    from reprobox.compare._summary import ignored_groups, run_specific_groups

    lines = []
    for group in run_specific_groups(comparison.run_specific):
        example = group.get("example") or {}
        shown = ""
        if example and example.get("name") != WHOLE_FILE:
            shown = f"  (e.g. {example['name']}: {_short(example.get('a'))} vs {_short(example.get('b'))})"
        lines.append(f"  run-specific: {group['text']}{shown}")
    lines.extend(f"  ignored: {group['text']}" for group in ignored_groups(comparison.ignored))
    return lines


def _short(value: object, length: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= length else text[: length - 3] + "..."


def stack_lines(explanation: dict[str, Any]) -> list[str]:
    """The stack fields that differ, those that change numerics first, then the equal ones as one line:
    what differs is read first, and the rest is only counted."""
    shown = [f for f in explanation.get("fields") or [] if not is_per_rank(str(f.get("field")))]
    differing = int(explanation.get("differing_fields", len(shown)))
    equal = int(explanation.get("equal_fields") or 0)
    lines = ["  stack fields that differ (reference run -> the other):"] if shown else []
    for entry in shown[:LISTED_FIELDS]:
        effect = "" if entry.get("affects_numerics") else "  (no effect on numerics)"
        lines.append(f"    {entry['label']}: {show_value(entry['a'])} -> {show_value(entry['b'])}{effect}")
    listed = min(len(shown), LISTED_FIELDS)
    if differing > listed:
        lines.append(f"    ... and {differing - listed} more")
    if equal:
        lines.append(f"  {equal} stack fields equal" if not shown else f"    {equal} fields equal")
    return lines


def operation_lines(first: dict[str, Any]) -> list[str]:
    """The drill-down's sentence, then the aligned operations around the first diverging one."""
    operation = first.get("operation") or {}
    drill = first.get("drill_down") or {}
    sentence = operation.get("sentence") or drill.get("sentence")
    if not sentence:
        return []
    lines = [f"  first diverging operation: {sentence}"]
    for row in operation.get("context") or []:
        mark = ">>" if row.get("diverges") else "  "
        index = f"{'-' if row.get('a') is None else row['a']}/{'-' if row.get('b') is None else row['b']}"
        lines.append(
            f"    {mark} {index:>11} {row.get('phase', ''):<9} {row.get('op', ''):<32} "
            f"{row.get('module', ''):<24} {source_text(row):<20} {row.get('status', '')}"
        )
    if drill.get("replays"):
        lines.append(f"    replays (with their op logs): {' '.join(drill['replays'])}")
    return lines


def source_text(row: dict[str, Any]) -> str:
    """A context row's source line, both versions' where they differ (`model.py:20 -> model.py:23`)."""
    source = str(row.get("source") or "")
    return f"{source} -> {row['source_b']}" if row.get("source_b") else source


def divergence_text(first: dict[str, Any]) -> str:
    """Where the runs first differ, as exactly as the trail knows it: a step, or a bracket of two steps."""
    step, previous = first.get("step"), first.get("previous_identical_step")
    if previous is None:
        return f"by optimizer step {step} (the first step both trails recorded)"
    if isinstance(step, int) and step - previous <= 1:
        return f"at optimizer step {step}"
    return f"after optimizer step {previous} (equal), by step {step} (differs)"


def _value_lines(label: str, entries: Sequence[dict[str, Any]], why_key: str) -> list[str]:
    """Each differing value with both sides; a series that differs at many steps (a logged rate, a
    CSV column) is one line with its count and first difference."""
    from reprobox.compare._summary import series_name

    series: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in entries:
        name = str(entry.get("name"))
        series.setdefault((str(entry.get("checkpoint")), series_name(name)), []).append(entry)
    lines = []
    for (checkpoint, name), items in series.items():
        if len(items) >= SERIES_AT:
            first = items[0]
            count = f"{len(items)} values (first {first.get('name')}{_both(first)})"
            lines.append(f"  {label}: {checkpoint}  {name}: {count}{_why(first, why_key)}")
            continue
        lines += [
            f"  {label}: {item.get('checkpoint')}  {item.get('name')}{_both(item)}{_why(item, why_key)}"
            for item in items
        ]
    if len(lines) > LISTED_VALUES:
        lines = [
            *lines[:LISTED_VALUES],
            f"  ... {len(entries)} {label} entries in all (--json lists every one)",
        ]
    return lines


def _both(entry: dict[str, Any]) -> str:
    return f"  {entry['a']!r} vs {entry['b']!r}" if "a" in entry else ""


def _why(entry: dict[str, Any], key: str) -> str:
    return f"  ({entry[key]})" if entry.get(key) else ""


def _difference_table(differences: Sequence[dict[str, Any]], total: int) -> str:
    header = ("checkpoint", "tensor", "differing", "max abs", "max rel", "max ULP")
    rows = [header]
    for d in differences:
        rows.append(
            (
                str(d.get("checkpoint", "")),
                str(d.get("name", "")),
                _count(d),
                show_number(d.get("max_abs")),
                show_number(d.get("max_rel")),
                str(d["max_ulp"]) if d.get("max_ulp") is not None else "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    text = ["  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    if total > len(differences):
        text.append(f"  ... {total} differing tensors in all")
    return "\n".join(text)


def _count(d: dict[str, Any]) -> str:
    if d.get("note"):
        return str(d["note"])
    if d.get("differing") is None:
        return "-"
    return f"{d['differing']}/{d.get('total', '?')}"
