"""`reprobox report`: a Markdown or self-contained HTML document explaining a set of runs.

Meant to be attached to a paper review: the verdict first, then why (stack differences, tensor
differences, the first diverging step), then the evidence (fingerprints side by side, hashes, plot).
The document is built once as a list of blocks; Markdown and HTML are two renderings of it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobox import stackdiff, trails
from reprobox.compare import Comparison, compare_runs
from reprobox.guest.fingerprint import iter_fields
from reprobox.records.manifest import RunRecord
from reprobox.render.terminal import VERDICT_SENTENCES, divergence_text, short

MAX_FINGERPRINT_ROWS = 400
SHOWN_PARAMETERS = 12
TENSOR_HEADERS = ("checkpoint", "tensor", "dtype", "differing elements", "max abs", "max rel", "max ULP")


@dataclass
class ReportData:
    records: list[RunRecord]
    comparison: Comparison
    stack_differences: list[stackdiff.FieldDifference]
    stack_sentence: str | None
    drift: list[tuple[int, float]]
    losses: list[tuple[str, list[tuple[int, float]]]]


@dataclass(frozen=True)
class Block:
    """One piece of the document: a heading, a paragraph (with an optional bold label), a list, a
    table (rows whose first cell is in `highlight` are marked), or the figure."""

    kind: str
    text: str = ""
    label: str = ""
    items: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    highlight: frozenset[str] = field(default_factory=frozenset)
    ident: str = ""


def gather(records: Sequence[RunRecord], comparison: Comparison | None = None) -> ReportData:
    comparison = comparison or compare_runs(records)
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
    doc += [Block("heading", "Runs"), _table(("run", "status", "started", "stack digest"), _run_rows(data))]
    if data.stack_differences:
        rows = [
            (d.label, d.field, _show(d.a), _show(d.b), "yes" if d.affects_numerics else "no")
            for d in data.stack_differences
        ]
        doc += [
            Block("heading", "Stack differences"),
            _table(("what", "field", "run A", "run B", "numerics"), rows),
        ]
    doc += [
        Block("heading", "Checkpoints"),
        _table(("checkpoint", "identical", *_run_headers(data)), _checkpoint_rows(c)),
    ]
    if c.differences:
        doc += [
            Block("heading", "Differing tensors"),
            _table(TENSOR_HEADERS, _tensor_rows(c), ident="tensors"),
        ]
        if c.differing_tensor_total > len(c.differences):
            shown = (
                f"{c.differing_tensor_total} tensors differ in all; the first {len(c.differences)} are shown."
            )
            doc.append(Block("para", shown))
    for heading, entries, why in (
        ("Differing values", c.value_differences, "note"),
        ("Run-specific values (not counted against the verdict)", c.run_specific, "reason"),
        ("Ignored by the job file", c.ignored, "rule"),
    ):
        if entries:
            rows = [
                (
                    str(e.get("checkpoint")),
                    str(e.get("name")),
                    _show(e.get("a")),
                    _show(e.get("b")),
                    str(e.get(why) or ""),
                )
                for e in entries
            ]
            doc += [Block("heading", heading), _table(("file", "value", "run A", "run B", why), rows)]
    if figure:
        doc += [Block("heading", "Divergence per step"), Block("figure", "divergence per optimizer step")]
    if c.notes:
        doc += [Block("heading", "Notes"), Block("list", items=tuple(c.notes))]
    differing = frozenset(d.field for d in data.stack_differences)
    fingerprints = _table(
        ("field", *_run_headers(data)), _fingerprint_rows(data, differing), highlight=differing
    )
    return [*doc, Block("heading", "Fingerprints"), fingerprints]


# -- Markdown ---------------------------------------------------------------------------------------


def markdown(data: ReportData, figure_name: str | None, lead: Sequence[Block] = ()) -> str:
    lines = [f"# {title(data)}"]
    for block in blocks(data, figure=figure_name is not None, lead=lead):
        lines.append("")
        if block.kind == "verdict":
            lines.append(f"**Verdict: {block.text}.**")
        elif block.kind == "heading":
            lines.append(f"## {block.text}")
        elif block.kind == "para":
            lines.append(f"**{block.label}** {block.text}" if block.label else block.text)
        elif block.kind == "list":
            lines.extend(f"- {item}" for item in block.items)
        elif block.kind == "table":
            lines.append(_md_table(block))
        elif block.kind == "figure":
            lines.append(f"![{block.text}]({figure_name})")
    return "\n".join(lines) + "\n"


def _md_table(block: Block) -> str:
    def cell(text: str, first: bool) -> str:
        text = text.replace("|", "\\|").replace("\n", " ")
        return f"**{text}**" if first and text in block.highlight else text

    out = ["| " + " | ".join(block.headers) + " |", "|" + "---|" * len(block.headers)]
    out += ["| " + " | ".join(cell(v, i == 0) for i, v in enumerate(row)) + " |" for row in block.rows]
    return "\n".join(out)


# -- HTML -------------------------------------------------------------------------------------------

_CSS = """
body{font:15px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:70rem;color:#1d2731;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.25rem}
h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #dde3e8}
.verdict{font-size:1.2rem;font-weight:600;padding:.8rem 1rem;border-radius:6px;margin:1rem 0}
.identical{background:#e3f6e8;color:#14532d}
.different{background:#fde8e6;color:#7f1d1d}
.failed{background:#fff4d6;color:#713f12}
table{border-collapse:collapse;width:100%;table-layout:fixed;overflow-wrap:anywhere;font-size:13px;
margin:.5rem 0}
th,td{border:1px solid #dde3e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f6f8}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.diff td{background:#fff1c2}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.muted{color:#6b7780}
figure{margin:1rem 0}
figure svg,figure img{max-width:100%;height:auto}
"""


def html_document(data: ReportData, figure_svg: bytes | None, lead: Sequence[Block] = ()) -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{e(title(data))}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(title(data))}</h1>",
    ]
    for block in blocks(data, figure=figure_svg is not None, lead=lead):
        if block.kind == "verdict":
            parts.append(
                f"<div class='verdict {e(data.comparison.verdict)}' id='verdict'>{e(block.text)}</div>"
            )
        elif block.kind == "heading":
            parts.append(f"<h2>{e(block.text)}</h2>")
        elif block.kind == "para":
            ident = f" id='{e(block.ident)}'" if block.ident else ""
            label = f"<strong>{e(block.label)}</strong> " if block.label else ""
            parts.append(f"<p{ident}>{label}{e(block.text)}</p>")
        elif block.kind == "list":
            parts.append("<ul>" + "".join(f"<li>{e(item)}</li>" for item in block.items) + "</ul>")
        elif block.kind == "table":
            parts.append(_html_table(block))
        elif block.kind == "figure" and figure_svg is not None:
            svg = figure_svg.decode("utf-8")
            parts.append(f"<figure id='plot'>{svg[svg.index('<svg') :]}</figure>")
    parts.append("<p class='muted'>Generated by reprobox.</p></body></html>")
    return "\n".join(parts)


def _html_table(block: Block) -> str:
    e = html.escape
    ident = f" id='{block.ident}'" if block.ident else ""
    out = [
        f"<table{ident}><thead><tr>"
        + "".join(f"<th>{e(h)}</th>" for h in block.headers)
        + "</tr></thead><tbody>"
    ]
    for row in block.rows:
        css = " class='diff'" if row and row[0] in block.highlight else ""
        cells = "".join(f"<td class='num'>{e(v)}</td>" if _numeric(v) else f"<td>{e(v)}</td>" for v in row)
        out.append(f"<tr{css}>{cells}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


# -- rows -------------------------------------------------------------------------------------------


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    highlight: frozenset[str] = frozenset(),
    ident: str = "",
) -> Block:
    return Block(
        "table", headers=tuple(headers), rows=tuple(tuple(r) for r in rows), highlight=highlight, ident=ident
    )


def _run_headers(data: ReportData) -> list[str]:
    return [f"run {chr(ord('A') + i)}" for i in range(len(data.records))]


def _run_rows(data: ReportData) -> list[list[str]]:
    rows = []
    for index, record in enumerate(data.records):
        digest = record.fingerprint.get("stack_digest")
        started = record.started_at
        label = f"{chr(ord('A') + index)}: {record.run_dir}"
        rows.append([label, record.status, started, short(digest if isinstance(digest, str) else None)])
    return rows


def _checkpoint_rows(c: Comparison) -> list[list[str]]:
    return [
        [
            entry["path"],
            "yes" if entry["identical"] else "NO",
            *[short(r["content_sha256"]) for r in entry["runs"]],
        ]
        for entry in c.checkpoints
    ]


def _tensor_rows(c: Comparison) -> list[list[str]]:
    rows = []
    for d in c.differences:
        count = d.get("note") or (
            f"{d['differing']} of {d['total']}" if d.get("differing") is not None else "-"
        )
        ulp = str(d["max_ulp"]) if d.get("max_ulp") is not None else "-"
        rows.append(
            [
                str(d.get("checkpoint", "")),
                str(d.get("name", "")),
                str(d.get("dtype", "")),
                str(count),
                _number(d.get("max_abs")),
                _number(d.get("max_rel")),
                ulp,
            ]
        )
    return rows


def _fingerprint_rows(data: ReportData, differing: frozenset[str]) -> list[list[str]]:
    """Every fingerprint field side by side, the differing ones first."""
    columns = [dict(iter_fields(r.fingerprint)) for r in data.records]
    every = {f for column in columns for f in column if not f.startswith("ranks.")}
    fields = sorted(every, key=lambda f: (f not in differing, f))[:MAX_FINGERPRINT_ROWS]
    return [[name, *[_show(column.get(name)) for column in columns]] for name in fields]


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict) and set(value) == {"absent"}:
        return f"absent ({value['absent']})"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.3g}"


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def write_report(
    records: Sequence[RunRecord], *, html_path: Path | None, markdown_path: Path | None
) -> ReportData:
    """Write the requested documents atomically; returns what went into them."""
    from reprobox.records.manifest import write_bytes_atomic, write_text_atomic
    from reprobox.render.plots import divergence_figure

    data = gather(records)
    want_plot = bool(data.drift or any(series for _, series in data.losses))
    first = data.comparison.first_divergence["step"] if data.comparison.first_divergence else None
    if html_path is not None:
        svg = divergence_figure(data.drift, data.losses, first, fmt="svg") if want_plot else None
        write_text_atomic(html_path, html_document(data, svg))
    if markdown_path is not None:
        figure_name = None
        if want_plot:
            png = markdown_path.with_suffix(".png")
            write_bytes_atomic(png, divergence_figure(data.drift, data.losses, first, fmt="png"))
            figure_name = png.name
        write_text_atomic(markdown_path, markdown(data, figure_name))
    return data
