"""The report document as data: what `reprobox report` and `reprobox reproduce` say about a set of runs.

Meant to be attached to a paper review: the verdict first, then why (stack differences, tensor
differences, the first diverging step), then the evidence (fingerprints side by side, hashes, plot).
The document is built once here as a list of blocks, so that its two renderings (`markdown`, `html`)
cannot disagree on what it says; `report_files` writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reprobox import stackdiff, trails
from reprobox.compare import Comparison, compare_runs
from reprobox.guest.fingerprint import iter_fields
from reprobox.records.manifest import RunRecord
from reprobox.render.blocks import Block, table
from reprobox.render.long_runs import long_run_blocks
from reprobox.render.operations import operation_blocks
from reprobox.render.terminal import VERDICT_SENTENCES, divergence_text, short
from reprobox.valuetext import BLANK, show_number, show_value

MAX_FINGERPRINT_ROWS = 400
SHOWN_PARAMETERS = 12
VALUE_HEADERS = ("file", "value", "run A", "run B")
STATUS_TEXT = {  # a checkpoint row's status (compare._table), as the table's reader reads it
    "same": "same bytes",
    "equal": "equal tensors and values (other bytes)",
    "run-specific": "equal but run-specific values",
    "resharded": "equal tensors by name, other shards",
    "in database": "a database's data file, compared through its keys",
    "ignored": "ignored by the job file",
    "unreadable": "DIFFERS, format not readable",
    "differs": "DIFFERS",
    "missing": "missing in a run",
}
AGREEING_TEXT = frozenset(
    STATUS_TEXT[s] for s in ("same", "equal", "run-specific", "resharded", "in database", "ignored")
)
TENSOR_HEADERS = ("checkpoint", "tensor", "dtype", "differing elements", "max abs", "max rel", "max ULP")


@dataclass
class ReportData:
    records: list[RunRecord]
    comparison: Comparison
    stack_differences: list[stackdiff.FieldDifference]
    stack_sentence: str | None
    drift: list[tuple[int, float]]
    losses: list[tuple[str, list[tuple[int, float]]]]


def gather(records: Sequence[RunRecord], comparison: Comparison | None = None) -> ReportData:
    comparison = comparison or compare_runs(records)
    if len(records) == 2 and comparison.first_divergence and "operation" not in comparison.first_divergence:
        from reprobox.forensics.drilldown import analyze  # runs that hold op logs: drill-down replays

        operation, _ranks = analyze(records[0].run_dir, records[1].run_dir)
        if operation is not None:
            comparison.first_divergence["operation"] = operation
    reference, other = records[0], records[-1]
    diffs = stackdiff.diff_fingerprints(reference.fingerprint, other.fingerprint) if len(records) > 1 else []
    sentence = (comparison.explanation or {}).get("sentence") if comparison.verdict == "different" else None
    trail_a, trail_b = trails.trail_of(reference), trails.trail_of(other)
    drift = trails.divergence_series(trail_a, trail_b) if trail_a and trail_b and len(records) > 1 else []
    losses = []
    for record in records:
        trail = trails.trail_of(record)
        if trail is not None:
            losses.append((f"run {record.run_id}", trails.loss_series(trail)))
    return ReportData(list(records), comparison, diffs, sentence, drift, losses)


def headline(data: ReportData) -> str:
    c = data.comparison
    return c.sentence or VERDICT_SENTENCES.get(c.verdict, c.verdict).format(n=len(data.records))


def title(data: ReportData) -> str:
    return f"reprobox report: {data.records[0].job_name}"


def blocks(data: ReportData, *, figure: bool, lead: Sequence[Block] = ()) -> list[Block]:
    """The document, in reading order; `lead` goes right after the title (reproduce's summary)."""
    c = data.comparison
    doc: list[Block] = [*lead, Block("verdict", headline(data))]
    if data.stack_sentence:
        doc.append(Block("para", data.stack_sentence, label="Why:"))
    if c.first_divergence:
        fd = c.first_divergence
        names = ", ".join(fd["parameters"][:SHOWN_PARAMETERS])
        text = f"First divergence {divergence_text(fd)} in: {names}."
        doc.append(Block("para", text, ident="first-divergence"))
        doc += operation_blocks(fd)
    doc += [Block("heading", "Runs"), table(("run", "status", "started", "stack digest"), _run_rows(data))]
    doc += long_run_blocks(data.records)
    if data.stack_differences:
        rows = [
            (d.label, d.field, _cell(d.a), _cell(d.b), "yes" if d.affects_numerics else "no")
            for d in data.stack_differences
        ]
        doc += [
            Block("heading", "Stack differences"),
            table(("what", "field", "run A", "run B", "numerics"), rows),
        ]
    files = _checkpoint_rows(c)
    doc += [
        Block("heading", "Checkpoints"),
        table(
            ("checkpoint", "found", *_run_headers(data.records)),
            files,
            highlight=frozenset(row[0] for row in files if row[1] not in AGREEING_TEXT),
            ident="checkpoints",
        ),
    ]
    if any(r.claims for r in data.records):
        doc += [
            Block("heading", "Claimed numbers"),
            table(("claim", "source", *_run_headers(data.records)), _claim_rows(data)),
        ]
    if c.differences:
        doc += [
            Block("heading", "Differing tensors"),
            table(TENSOR_HEADERS, _tensor_rows(c), ident="tensors"),
        ]
        if c.differing_tensor_total > len(c.differences):
            shown = (
                f"{c.differing_tensor_total} tensors differ in all; the first {len(c.differences)} are shown."
            )
            doc.append(Block("para", shown))
    if c.value_differences:
        doc += [
            Block("heading", "Differing values"),
            table((*VALUE_HEADERS, "note"), _value_rows(c.value_differences, "note")),
        ]
    doc += _excused_blocks(c)
    if figure:
        doc += [Block("heading", "Divergence per step"), Block("figure", "divergence per optimizer step")]
    if c.notes:
        doc += [Block("heading", "Notes"), Block("list", items=tuple(c.notes))]
    return [*doc, Block("heading", "Fingerprints"), *fingerprint_blocks(data.records)]


def fingerprint_blocks(records: Sequence[RunRecord]) -> list[Block]:
    """Every fingerprint field side by side, what differs first: the differing fields marked, in the
    order the stack explanation ranks them, then the equal ones folded under one line that counts them."""
    columns = [dict(iter_fields(r.fingerprint)) for r in records]
    recorded = list(dict.fromkeys(f for c in columns for f in c if not stackdiff.is_per_rank(f)))
    headers = ("field", *_run_headers(records))
    if not recorded:
        return [Block("para", "No fingerprint was recorded.")]
    if len(records) < 2:
        return [table(headers, _field_rows(recorded[:MAX_FINGERPRINT_ROWS], columns), ident="fingerprints")]
    equal, ranked = set(recorded), {}
    for other in records[1:]:
        diffs = stackdiff.diff_fingerprints(records[0].fingerprint, other.fingerprint)
        ranked.update(dict.fromkeys(d.field for d in diffs))  # most numerics-relevant first
        equal &= set(stackdiff.equal_fields(records[0].fingerprint, other.fingerprint, diffs))
    shown = set(recorded) - equal
    differing = list(dict.fromkeys(f for f in [*ranked, *recorded] if f in shown))[:MAX_FINGERPRINT_ROWS]
    same = [f for f in recorded if f in equal]
    doc = [
        table(
            headers,
            _field_rows(differing, columns),
            highlight=frozenset(differing),
            ident="fingerprint-differences",
        )
        if differing
        else Block("para", f"No fingerprint field differs between the {len(records)} runs.")
    ]
    if same:
        rows = [(name, _cell(columns[0].get(name))) for name in same[: MAX_FINGERPRINT_ROWS - len(differing)]]
        doc.append(
            Block(
                "fold",
                f"{len(same)} fields equal",
                headers=("field", "every run"),
                rows=tuple(rows),
                ident="equal-fields",
            )
        )
    return doc


# -- tables -------------------------------------------------------------------------------------------


def _run_headers(records: Sequence[RunRecord]) -> list[str]:
    return [f"run {chr(ord('A') + i)}" for i in range(len(records))]


def _run_rows(data: ReportData) -> list[list[str]]:
    rows = []
    for index, record in enumerate(data.records):
        digest = record.fingerprint.get("stack_digest")
        started = record.started_at
        label = f"{chr(ord('A') + index)}: {record.run_dir}"
        rows.append([label, record.status, started, short(digest if isinstance(digest, str) else None)])
    return rows


def _claim_rows(data: ReportData) -> list[list[str]]:
    """Each claim the job file makes, as every run produced it (the first run's source)."""
    names = list(dict.fromkeys(str(c.get("name")) for r in data.records for c in r.claims))
    rows = []
    for name in names:
        entries = [r.claim(name) or {} for r in data.records]
        first = next((e for e in entries if e), {})
        source = f"{first.get('file')}: {first.get('key')}"
        values = [_cell(e.get("value")) if e.get("error") is None else str(e.get("error")) for e in entries]
        rows.append([name, source, *values])
    return rows


def _excused_blocks(c: Comparison) -> list[Block]:
    """Run-specific values by kind with counts, then every one of them folded; the same for what the job
    file ignores, by rule."""
    from reprobox.compare._summary import ignored_groups, run_specific_groups

    doc: list[Block] = []
    for heading, entries, why, groups in (
        (
            "Run-specific values (not counted against the verdict)",
            c.run_specific,
            "reason",
            run_specific_groups,
        ),
        ("Ignored by the job file", c.ignored, "rule", ignored_groups),
    ):
        if entries:
            doc += [
                Block("heading", heading),
                Block("list", items=tuple(str(group["text"]) for group in groups(entries))),
                Block(
                    "fold",
                    f"every one of the {len(entries)} values",
                    headers=(*VALUE_HEADERS, why),
                    rows=tuple(tuple(row) for row in _value_rows(entries, why)),
                ),
            ]
    return doc


def _value_rows(entries: Sequence[dict[str, Any]], why: str) -> list[list[str]]:
    return [
        [
            str(e.get("checkpoint")),
            str(e.get("name")),
            _cell(e.get("a")),
            _cell(e.get("b")),
            str(e.get(why) or ""),
        ]
        for e in entries
    ]


def _checkpoint_rows(c: Comparison) -> list[list[str]]:
    """Each output file: its name (and its other names where the runs named it differently), what the
    comparison found in it, and its content hash in each run."""
    rows = []
    for entry in c.checkpoints:
        names = [str(r["path"]) for r in entry["runs"] if r.get("path") and r["path"] != entry["path"]]
        named = f" (also named {', '.join(dict.fromkeys(names))})" if names else ""
        status = str(entry.get("status") or ("same" if entry["identical"] else "differs"))
        rows.append(
            [
                f"{entry['path']}{named}",
                STATUS_TEXT.get(status, status),
                *[short(r["content_sha256"]) for r in entry["runs"]],
            ]
        )
    return rows


def _tensor_rows(c: Comparison) -> list[list[str]]:
    rows = []
    for d in c.differences:
        count = d.get("note") or (
            f"{d['differing']} of {d['total']}" if d.get("differing") is not None else BLANK
        )
        ulp = str(d["max_ulp"]) if d.get("max_ulp") is not None else BLANK
        rows.append(
            [
                str(d.get("checkpoint", "")),
                str(d.get("name", "")),
                str(d.get("dtype", "")),
                str(count),
                show_number(d.get("max_abs")),
                show_number(d.get("max_rel")),
                ulp,
            ]
        )
    return rows


def _field_rows(names: Sequence[str], columns: Sequence[dict[str, object]]) -> list[list[str]]:
    return [[name, *[_cell(column.get(name)) for column in columns]] for name in names]


def _cell(value: object) -> str:
    """A value in a table cell: a missing field or a null is a blank, not a sentence."""
    return show_value(value, none=BLANK)
