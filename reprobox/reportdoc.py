"""`reprobox report`: a Markdown or self-contained HTML document explaining a set of runs.

Meant to be attached to a paper review: the verdict first, then why (stack differences, tensor
differences, the first diverging step), then the evidence (fingerprints side by side, hashes, plot).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobox import explain, trails
from reprobox.compare import Comparison, closeness, compare_runs
from reprobox.guest.fingerprint import iter_fields
from reprobox.manifest import RunRecord
from reprobox.report import VERDICT_SENTENCES, short

MAX_FINGERPRINT_ROWS = 400


@dataclass
class ReportData:
    records: list[RunRecord]
    comparison: Comparison
    stack_differences: list[explain.FieldDifference]
    stack_sentence: str | None
    drift: list[tuple[int, float]]
    losses: list[tuple[str, list[tuple[int, float]]]]


def gather(records: Sequence[RunRecord], comparison: Comparison | None = None) -> ReportData:
    comparison = comparison or compare_runs(records)
    reference, other = records[0], records[-1]
    diffs = explain.diff_fingerprints(reference.fingerprint, other.fingerprint) if len(records) > 1 else []
    sentence = None
    if comparison.verdict == "different":
        sentence = explain.stack_verdict(diffs, closeness=closeness(comparison))  # same as compare's
    trail_a, trail_b = trails.trail_of(reference), trails.trail_of(other)
    drift = trails.divergence_series(trail_a, trail_b) if trail_a and trail_b and len(records) > 1 else []
    losses = []
    for record in records:
        trail = trails.trail_of(record)
        if trail is not None:
            losses.append((f"run {record.run_id}", trails.loss_series(trail)))
    return ReportData(list(records), comparison, diffs, sentence, drift, losses)


def headline(data: ReportData) -> str:
    return VERDICT_SENTENCES.get(data.comparison.verdict, data.comparison.verdict).format(n=len(data.records))


# -- Markdown ---------------------------------------------------------------------------------------


def markdown(data: ReportData, figure_name: str | None) -> str:
    c = data.comparison
    lines = [
        f"# reprobox report: {data.records[0].data.get('job_name', '')}",
        "",
        f"**Verdict: {headline(data)}.**",
    ]
    if data.stack_sentence:
        lines += ["", f"**Why:** {data.stack_sentence}."]
    if c.first_divergence:
        fd = c.first_divergence
        lines += [
            "",
            f"First divergence at optimizer step **{fd['step']}** in: {', '.join(fd['parameters'][:12])}.",
        ]
    lines += [
        "",
        "## Runs",
        "",
        _md_table(["run", "status", "started", "stack digest"], _run_rows(data.records)),
    ]
    if data.stack_differences:
        rows = [
            [d.label, d.field, _show(d.a), _show(d.b), "yes" if d.affects_numerics else "no"]
            for d in data.stack_differences
        ]
        lines += [
            "",
            "## Stack differences",
            "",
            _md_table(["what", "field", "run A", "run B", "affects numerics"], rows),
        ]
    lines += [
        "",
        "## Checkpoints",
        "",
        _md_table(["checkpoint", "identical", *_run_headers(data)], _checkpoint_rows(c)),
    ]
    if c.differences:
        lines += ["", "## Differing tensors", "", _md_table(_TENSOR_HEADERS, _tensor_rows(c))]
        if c.differing_tensor_total > len(c.differences):
            lines.append(
                f"\n{c.differing_tensor_total} tensors differ in all; "
                f"the first {len(c.differences)} are shown."
            )
    if figure_name:
        lines += ["", "## Divergence per step", "", f"![divergence per optimizer step]({figure_name})"]
    if c.notes:
        lines += ["", "## Notes", "", *[f"- {note}" for note in c.notes]]
    lines += [
        "",
        "## Fingerprints",
        "",
        _md_table(["field", *_run_headers(data)], _fingerprint_rows(data, mark="**")),
    ]
    return "\n".join(lines) + "\n"


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(str(v)) for v in row) + " |" for row in rows]
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


def html_document(data: ReportData, figure_svg: bytes | None) -> str:
    c = data.comparison
    e = html.escape
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>reprobox report: {e(str(data.records[0].data.get('job_name', '')))}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>reprobox report: {e(str(data.records[0].data.get('job_name', '')))}</h1>",
        f"<div class='verdict {e(c.verdict)}' id='verdict'>{e(headline(data))}</div>",
    ]
    if data.stack_sentence:
        parts.append(f"<p id='why'><strong>Why:</strong> {e(data.stack_sentence)}.</p>")
    if c.first_divergence:
        fd = c.first_divergence
        params = ", ".join(f"<code>{e(p)}</code>" for p in fd["parameters"][:12])
        parts.append(
            f"<p id='first-divergence'>First divergence at optimizer step <strong>{fd['step']}</strong> "
            f"in {params}.</p>"
        )
    parts += [
        "<h2>Runs</h2>",
        _html_table(["run", "status", "started", "stack digest"], _run_rows(data.records)),
    ]
    if data.stack_differences:
        rows = [
            [d.label, d.field, _show(d.a), _show(d.b), "yes" if d.affects_numerics else "no"]
            for d in data.stack_differences
        ]
        parts += [
            "<h2>Stack differences</h2>",
            _html_table(["what", "field", "run A", "run B", "affects numerics"], rows),
        ]
    parts += [
        "<h2>Checkpoints</h2>",
        _html_table(["checkpoint", "identical", *_run_headers(data)], _checkpoint_rows(c)),
    ]
    if c.differences:
        parts += [
            "<h2>Differing tensors</h2>",
            _html_table(_TENSOR_HEADERS, _tensor_rows(c), table_id="tensors"),
        ]
        if c.differing_tensor_total > len(c.differences):
            parts.append(
                f"<p class='muted'>{c.differing_tensor_total} tensors differ in all; "
                f"the first {len(c.differences)} are shown.</p>"
            )
    if figure_svg:
        svg = figure_svg.decode("utf-8")
        svg = svg[svg.index("<svg") :]
        parts += ["<h2>Divergence per step</h2>", f"<figure id='plot'>{svg}</figure>"]
    if c.notes:
        parts += ["<h2>Notes</h2><ul>", *[f"<li>{e(n)}</li>" for n in c.notes], "</ul>"]
    fingerprint_rows = _fingerprint_rows(data, mark="")
    differing = {d.field for d in data.stack_differences}
    parts += [
        "<h2>Fingerprints</h2>",
        _html_table(["field", *_run_headers(data)], fingerprint_rows, highlight=differing),
    ]
    parts.append("<p class='muted'>Generated by reprobox.</p></body></html>")
    return "\n".join(parts)


def _html_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    highlight: set[str] | None = None,
    table_id: str | None = None,
) -> str:
    e = html.escape
    ident = f" id='{table_id}'" if table_id else ""
    out = [
        f"<table{ident}><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in headers) + "</tr></thead><tbody>"
    ]
    for row in rows:
        css = " class='diff'" if highlight and row and row[0] in highlight else ""
        cells = "".join(
            f"<td class='num'>{e(str(v))}</td>" if _numeric(str(v)) else f"<td>{e(str(v))}</td>" for v in row
        )
        out.append(f"<tr{css}>{cells}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


# -- shared rows ------------------------------------------------------------------------------------

_TENSOR_HEADERS = ["checkpoint", "tensor", "dtype", "differing elements", "max abs", "max rel", "max ULP"]


def _run_headers(data: ReportData) -> list[str]:
    return [f"run {chr(ord('A') + i)}" for i in range(len(data.records))]


def _run_rows(records: Sequence[RunRecord]) -> list[list[str]]:
    rows = []
    for index, record in enumerate(records):
        label = f"{chr(ord('A') + index)}: {record.run_dir}"
        digest = record.fingerprint.get("stack_digest")
        rows.append(
            [
                label,
                record.status,
                str(record.data.get("started_at", "")),
                short(digest if isinstance(digest, str) else None),
            ]
        )
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
        rows.append(
            [
                str(d.get("checkpoint", "")),
                str(d.get("name", "")),
                str(d.get("dtype", "")),
                str(count),
                _number(d.get("max_abs")),
                _number(d.get("max_rel")),
                str(d["max_ulp"]) if d.get("max_ulp") is not None else "-",
            ]
        )
    return rows


def _fingerprint_rows(data: ReportData, *, mark: str) -> list[list[str]]:
    columns = [dict(iter_fields(r.fingerprint)) for r in data.records]
    fields = sorted({f for column in columns for f in column if not f.startswith("ranks.")})[
        :MAX_FINGERPRINT_ROWS
    ]
    differing = {d.field for d in data.stack_differences}
    rows = []
    for field in fields:
        label = f"{mark}{field}{mark}" if mark and field in differing else field
        rows.append([label, *[_show(column.get(field)) for column in columns]])
    return rows


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
    from reprobox.manifest import write_bytes_atomic, write_text_atomic
    from reprobox.plots import divergence_figure

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
