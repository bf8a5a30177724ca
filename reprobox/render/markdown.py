"""A report document as Markdown, for a repository or a paper's supplementary material."""

from __future__ import annotations

import html
from collections.abc import Sequence

from reprobox.render.blocks import Block
from reprobox.render.document import ReportData, blocks, title


def markdown(data: ReportData, figure_name: str | None, lead: Sequence[Block] = ()) -> str:
    """The document as Markdown; `figure_name` is the PNG beside it, `lead` the blocks after the title."""
    return markdown_page(title(data), blocks(data, figure=figure_name is not None, lead=lead), figure_name)


def markdown_page(heading: str, doc: Sequence[Block], figure_name: str | None = None) -> str:
    """Any block document as Markdown (table cells keep their pipes and line breaks escaped)."""
    lines = [f"# {heading}"]
    for block in doc:
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
        elif block.kind == "fold":  # GitHub and most Markdown viewers fold a <details> block
            lines += [
                f"<details><summary>{html.escape(block.text)}</summary>",
                "",
                _md_table(block),
                "",
                "</details>",
            ]
        elif block.kind == "figure" and figure_name is not None:
            lines.append(f"![{block.text}]({figure_name})")
    return "\n".join(lines) + "\n"


def _md_table(block: Block) -> str:
    def cell(text: str, first: bool) -> str:
        text = text.replace("|", "\\|").replace("\n", " ")
        return f"**{text}**" if first and text in block.highlight else text

    out = ["| " + " | ".join(block.headers) + " |", "|" + "---|" * len(block.headers)]
    out += ["| " + " | ".join(cell(v, i == 0) for i, v in enumerate(row)) + " |" for row in block.rows]
    return "\n".join(out)
