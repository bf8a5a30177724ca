"""The report files: the HTML page, the Markdown file and its PNG plot, each written atomically, for
`reprobox report`'s runs and for `verify --vary`'s matrix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox.compare import Comparison
from reprobox.fileio import write_bytes_atomic, write_text_atomic
from reprobox.records.manifest import RunRecord
from reprobox.render.document import ReportData, gather
from reprobox.render.html import html_document, html_page
from reprobox.render.markdown import markdown, markdown_page

if TYPE_CHECKING:
    from reprobox.forensics.variation import VariationResult


def write_report(
    records: Sequence[RunRecord],
    *,
    html_path: Path | None,
    markdown_path: Path | None,
    comparison: Comparison | None = None,
) -> ReportData:
    """Write the requested documents atomically; returns what went into them."""
    from reprobox.render.plots import divergence_figure  # matplotlib: loaded only when a report is written

    data = gather(records, comparison)
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


def write_variation_report(
    result: VariationResult, job_name: str, *, html_path: Path | None, markdown_path: Path | None
) -> list[Path]:
    """The variation matrix as the requested documents (no plot: a matrix has no per-step curve)."""
    from reprobox.render import variation_document as matrix

    doc = matrix.matrix_blocks(result)
    heading = matrix.matrix_title(job_name)
    if html_path is not None:
        write_text_atomic(html_path, html_page(heading, doc, verdict=matrix.matrix_verdict(result)))
    if markdown_path is not None:
        write_text_atomic(markdown_path, markdown_page(heading, doc))
    return [path for path in (html_path, markdown_path) if path is not None]
