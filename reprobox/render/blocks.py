"""The pieces a report is made of, in reading order, before any renderer (Markdown, HTML) draws them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Block:
    """One piece of the document: a heading, a paragraph (with an optional bold label), a list, a
    table (rows whose first cell is in `highlight` are marked), a fold (a table shown under the one line
    `text`, closed until opened), or the figure."""

    kind: str
    text: str = ""
    label: str = ""
    items: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    highlight: frozenset[str] = field(default_factory=frozenset)
    ident: str = ""


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    highlight: frozenset[str] = frozenset(),
    ident: str = "",
) -> Block:
    return Block(
        "table", headers=tuple(headers), rows=tuple(tuple(r) for r in rows), highlight=highlight, ident=ident
    )
