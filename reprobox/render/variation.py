"""The variation matrix as terminal text: the verdict sentence first, then one line per factor."""

from __future__ import annotations

from reprobox.forensics.variation import SENSITIVE, FactorResult, VariationResult, factor_table
from reprobox.valuetext import show_number


def matrix_text(result: VariationResult) -> str:
    lines = [result.sentence(), "", f"baseline ({result.runtime}, run twice): {result.baseline.sentence}"]
    width = max((len(row.factor) for row in result.rows), default=8)
    for row in result.rows:
        lines.append(f"  {row.factor:<{width}}  {_status(row)}")
        if row.status == SENSITIVE:
            lines.extend(f"  {'':<{width}}    {detail}" for detail in _details(row))
    if result.combination_row is not None:
        row = result.combination_row
        lines.append(f"  combination {row.factor}: {_status(row)}")
        lines.extend(f"    {detail}" for detail in _details(row))
    return "\n".join(lines)


def _status(row: FactorResult) -> str:
    if row.reason:
        return f"{row.status}: {row.reason}"
    if row.status:
        return f"{row.status} ({row.baseline} vs {row.varied})"
    return "not judged"


def _details(row: FactorResult) -> list[str]:
    found = []
    if row.files:
        found.append("files: " + ", ".join(row.files))
    if row.only_baseline:
        found.append("only the baseline wrote: " + ", ".join(row.only_baseline))
    if row.only_varied:
        found.append("only the varied run wrote: " + ", ".join(row.only_varied))
    if row.tensors:
        found.append("tensors: " + ", ".join(row.tensors))
    if row.values_changed:
        found.append("values: " + ", ".join(row.values_changed))
    if row.max_abs is not None:
        found.append(f"max abs difference {show_number(row.max_abs)}")
    if row.first_step is not None:
        found.append(f"first diverging step {row.first_step}")
    if row.note:
        found.append(row.note)
    if row.pin:
        found.append(row.pin)
    return found


def factors_text() -> str:
    """`verify --vary list`: every factor, its pair of values and where it can be applied."""
    lines = []
    for item in factor_table():
        lines.append(f"{item['name']}: {item['doc']}")
        lines.append(f"    {item['values']}; {item['needs']}")
    return "\n".join(lines)
