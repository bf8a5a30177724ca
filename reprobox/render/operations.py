"""The report's drill-down section: the first diverging operation and the operations around it."""

from __future__ import annotations

from typing import Any

from reprobox.render.blocks import Block, table
from reprobox.render.terminal import source_text

OPERATION_HEADERS = ("op # (A/B)", "operation", "module", "phase", "source", "inputs", "outputs", "A vs B")


def operation_blocks(first: dict[str, Any]) -> list[Block]:
    """The drill-down: its sentence and the aligned operations around the first diverging one."""
    drill = first.get("drill_down") or {}
    operation = first.get("operation") or {}
    sentence = operation.get("sentence") or drill.get("sentence")
    if not sentence:
        return []
    doc = [Block("para", str(sentence), label="First diverging operation:", ident="first-operation")]
    context = operation.get("context") or []
    if context:
        rows = []
        marked = ""
        for row in context:
            cell = f"{_index(row.get('a'))}/{_index(row.get('b'))}"
            if row.get("diverges"):
                marked = cell
            rows.append(
                (
                    cell,
                    str(row.get("op")),
                    str(row.get("module")),
                    str(row.get("phase")),
                    source_text(row),
                    str(row.get("inputs")),
                    str(row.get("outputs")),
                    str(row.get("status")),
                )
            )
        step, rank = operation.get("step"), operation.get("rank", 0)
        heading = f"Operations around the divergence (step {step}, rank {rank})"
        doc += [
            Block("heading", heading),
            table(OPERATION_HEADERS, rows, highlight=frozenset({marked}), ident="operations"),
        ]
    return doc


def _index(value: object) -> str:
    return "-" if value is None else str(value)
