"""The report's long-run section: how a run was resumed or stopped, and which of its segments a
spot-check replayed and how each came out (shared by run reports and `reproduce --segments`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reprobox.records.manifest import RunRecord
from reprobox.records.spotcheck import read_spot_check
from reprobox.render.blocks import Block

SEGMENT_HEADERS = ("segment", "starts from", "ends at", "outcome", "what was found")


def long_run_blocks(records: Sequence[RunRecord]) -> list[Block]:
    """Resume facts and spot-checks of the runs, when any has them."""
    items: list[str] = []
    checks: list[tuple[RunRecord, dict[str, Any]]] = []
    for record in records:
        resume = record.resume
        started = resume.get("from") or {}
        if started:
            items.append(
                f"run {record.run_id} resumed from step {started.get('step')} ({started.get('checkpoint')}"
                f" of run {started.get('from_run')})"
            )
        if resume.get("stop_at") is not None:
            items.append(f"run {record.run_id} stopped after step {resume['stop_at']} (resume.stop)")
        checked = read_spot_check(record.run_dir)
        if checked is not None:
            checks.append((record, checked))
    if not items and not checks:
        return []
    doc = [Block("heading", "Long run")]
    if items:
        doc.append(Block("list", items=tuple(items)))
    for record, checked in checks:
        doc += [
            Block(
                "para",
                f"{checked.get('sentence', '')} (checked {checked.get('checked_at')}, "
                f"{checked.get('runtime')})",
                label=f"Spot-check of run {record.run_id}:",
            ),
            segment_table(checked.get("segments") or []),
        ]
    return doc


def segment_table(segments: Sequence[Mapping[str, Any]]) -> Block:
    rows = tuple(
        (
            f"steps {s.get('start')}-{s.get('end')}",
            str(s.get("start_checkpoint") or "the start"),
            str(s.get("end_checkpoint") or "the final outputs"),
            str(s.get("outcome")),
            str(s.get("sentence") or ""),
        )
        for s in segments
    )
    failing = frozenset(row[0] for row, s in zip(rows, segments, strict=True) if not s.get("match"))
    return Block("table", headers=SEGMENT_HEADERS, rows=rows, highlight=failing)
