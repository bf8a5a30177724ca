"""The variation matrix as a report document, built once as blocks so that its HTML and Markdown
renderings say the same thing.

`matrix_blocks` is what `verify --vary --html/--markdown` writes: the verdict sentence, one table row
per factor (the sensitive ones marked), the combination bisection found, and the baseline's runs.
`author_matrix_blocks` is the matrix an attestation carries, as `reproduce`'s report shows it: the
author's status per factor beside whether that factor differs on the reviewer's machine. That matrix
comes from someone else's file, so every cell is made text here and escaped by the renderer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reprobox.compare import FAILED, IDENTICAL
from reprobox.forensics.variation import SENSITIVE, UNSUPPORTED, FactorResult, VariationResult
from reprobox.forensics.variation.matrix import NAMES_LIMIT
from reprobox.records.attestation import VARIATION_NOT_APPLICABLE
from reprobox.render.blocks import Block
from reprobox.valuetext import BLANK, show_number, show_value

MATRIX_HEADERS = (
    "factor",
    "status",
    "baseline",
    "varied",
    "what changed",
    "max abs difference",
    "first diverging step",
    "what to pin",
)
AUTHOR_HEADERS = (
    "factor",
    "author's status",
    "author's value",
    "varied value",
    "differs here",
    "what changed for the author",
    "what to pin",
)
NOT_FINGERPRINTED = "not known (not in the fingerprint)"


def matrix_title(job_name: str) -> str:
    return f"reprobox verify --vary: {job_name}"


def matrix_verdict(result: VariationResult) -> str:
    """The verdict block's colour, named like a comparison's verdict."""
    if result.sensitive:
        return "different"
    return FAILED if result.failed else IDENTICAL


def matrix_blocks(result: VariationResult) -> list[Block]:
    """The matrix in reading order: verdict, factors (sensitive rows marked), combination, baseline, runs."""
    rows = [_result_row(row, row.factor) for row in result.rows]
    highlight = {row.factor for row in result.rows if row.status == SENSITIVE}
    combined = result.combination_row
    if combined is not None:
        label = "combination: " + " + ".join(result.combination or [combined.factor])
        rows.append(_result_row(combined, label))
        highlight.add(label)
    doc = [
        Block("verdict", result.sentence()),
        Block("heading", "Factors"),
        Block(
            "table", headers=MATRIX_HEADERS, rows=tuple(rows), highlight=frozenset(highlight), ident="matrix"
        ),
    ]
    if combined is not None:
        doc.append(
            Block(
                "para",
                f"Every factor at once changed the result while no one of them alone did; the smallest "
                f"combination that still does is {' + '.join(result.combination or [])}.",
                ident="combination",
            )
        )
    itself = (
        "bit-identical to itself, so every difference above is the factor's"
        if result.baseline_reproducible
        else "not identical to itself, so no difference can be blamed on a factor"
    )
    doc += [
        Block("heading", "Baseline"),
        Block(
            "para",
            f"Run twice on {result.runtime or 'this runtime'} with every factor at its baseline value: "
            f"{itself} ({result.baseline.sentence}).",
            label="reproduced itself:" if result.baseline_reproducible else "did not reproduce itself:",
            ident="baseline",
        ),
        Block("heading", "Runs"),
        Block("list", items=tuple(_run_items(result))),
    ]
    return doc


def _result_row(row: FactorResult, label: str) -> tuple[str, ...]:
    status = row.status or "not judged"
    if row.status == UNSUPPORTED and not row.applicable:
        status = VARIATION_NOT_APPLICABLE
    changed = (
        changed_text(row.files, row.tensors, row.values_changed, row.note)
        if row.status == SENSITIVE
        else row.reason
    )
    return (
        label,
        status,
        row.baseline or BLANK,
        row.varied or BLANK,
        changed or BLANK,
        show_number(row.max_abs),
        BLANK if row.first_step is None else str(row.first_step),
        (row.pin or BLANK) if row.status == SENSITIVE else BLANK,
    )


def _run_items(result: VariationResult) -> list[str]:
    items = [f"baseline {index}/2: {run}" for index, run in enumerate(result.baseline_runs, 1)]
    items += [f"{row.factor}: {row.run}" for row in result.rows if row.run]
    if result.combination_row is not None and result.combination_row.run:
        items.append(f"combination {result.combination_row.factor}: {result.combination_row.run}")
    return items


def changed_text(files: Sequence[str], tensors: Sequence[str], values: Sequence[str], note: str = "") -> str:
    """What a factor changed, in one cell: files, then tensors and values by name."""
    parts = []
    if files:
        parts.append("files: " + ", ".join(files))
    if tensors:
        more = f" (the first {NAMES_LIMIT})" if len(tensors) >= NAMES_LIMIT else ""
        parts.append(f"tensors{more}: " + ", ".join(tensors))
    if values:
        parts.append("values: " + ", ".join(values))
    if note:
        parts.append(note)
    return "; ".join(parts)


# -- the author's matrix, in reproduce's report ------------------------------------------------------------


def author_matrix_blocks(variation: Mapping[str, Any], differs_here: Mapping[str, bool]) -> list[Block]:
    """The attested matrix beside this machine: `differs_here` holds the factors reproduce can tell
    (from the fingerprints) and whether each differs; any other factor reads as not known."""
    rows = [row for row in variation.get("factors") or [] if isinstance(row, Mapping)]
    table = [
        (
            _text(row.get("factor")),
            _text(row.get("status")),
            _text(row.get("baseline")),
            _text(row.get("varied")),
            _here(_text(row.get("factor")), differs_here),
            _author_changed(row),
            _text(row.get("pin")) if row.get("status") == SENSITIVE else BLANK,
        )
        for row in rows
    ]
    sensitive = frozenset(_text(row.get("factor")) for row in rows if row.get("status") == SENSITIVE)
    doc = [
        Block("heading", "The author's variation matrix"),
        Block(
            "para",
            f"The author ran `reprobox verify --vary` on {_text(variation.get('runtime'))}; "
            "\"differs here\" compares the author's fingerprint with this machine's, which records the "
            "thread counts, the CPU kernel level, the host name and the world size (not the time zone, "
            "the user or the paths).",
            ident="author-variation",
        ),
        Block("table", headers=AUTHOR_HEADERS, rows=tuple(table), highlight=sensitive, ident="author-matrix"),
    ]
    combination = variation.get("combination")
    if isinstance(combination, list) and combination:
        names = " + ".join(_text(name) for name in combination)
        doc.append(
            Block("para", f"The author found the combination {names} changes the result (no one alone does).")
        )
    return doc


def _here(factor: str, differs_here: Mapping[str, bool]) -> str:
    if factor not in differs_here:
        return NOT_FINGERPRINTED
    return "yes" if differs_here[factor] else "no"


def _author_changed(row: Mapping[str, Any]) -> str:
    if row.get("status") != SENSITIVE:
        return _text(row.get("reason"))
    text = changed_text(
        _names(row.get("files")), _names(row.get("tensors")), _names(row.get("values_changed"))
    )
    numbers = []
    if isinstance(row.get("max_abs"), (int, float)):
        numbers.append(f"max abs {show_number(float(row['max_abs']))}")
    if isinstance(row.get("first_diverging_step"), int):
        numbers.append(f"first diverging step {row['first_diverging_step']}")
    return "; ".join(part for part in (text, *numbers) if part) or BLANK


def _names(value: object) -> list[str]:
    return [_text(item) for item in value] if isinstance(value, list) else []


def _text(value: object) -> str:
    """A cell from a file someone else wrote: whatever its type, one line of text (`-` when empty)."""
    if value in ("", None):
        return BLANK
    return " ".join(show_value(value, none=BLANK).splitlines())
