"""The checkpoint table: one row per output file, as a person reads the verdict.

A file the runs named differently (a run folder stamped with the clock, a random experiment id) is one
row once the comparison has paired its names, each run's name kept in its cell. Each row's status says
what the comparison found in that file, not only whether its tensors hash alike: a file whose tensors are
equal and one of whose values differs is a file that differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from reprobox.compare._ignore import ignore_rules, ignored_by
from reprobox.compare._marks import (
    AGREEING,
    DIFFERS,
    EQUAL,
    IGNORED,
    IN_DATABASE,
    MISSING,
    RESHARDED,
    RUN_SPECIFIC,
    SAME,
    UNREADABLE,
    WHOLE_FILE,
)
from reprobox.records.manifest import RunRecord

if TYPE_CHECKING:
    from reprobox.compare._model import Comparison


def paired_names(comparison: Comparison | None) -> dict[str, str]:
    """Each other run's file name -> the reference's, for files paired by a run-specific name or found
    under another name with the same content."""
    if comparison is None:
        return {}
    pairs = {}
    named = [e for e in comparison.run_specific if e.get("name") == WHOLE_FILE]
    for entry in [*named, *comparison.renamed]:  # renamed: the same content under another name
        a, b = entry.get("a"), entry.get("b")
        if isinstance(a, str) and isinstance(b, str) and a != b:
            pairs[b] = a
    return pairs


def checkpoint_table(
    records: Sequence[RunRecord], comparison: Comparison | None = None
) -> list[dict[str, Any]]:
    """Per output file: each run's name, file sha256 and content hash (None where it is missing), and
    what the comparison found in it (``status``); ``identical`` is true when nothing real differs in it.

    Without a comparison (a run failed, the trails decided) the status comes from the hashes alone.
    """
    pairs = paired_names(comparison)
    reference_paths = {str(c["path"]) for c in records[0].checkpoints} if records else set()
    paths = sorted({str(c["path"]) for r in records for c in r.checkpoints} - (set(pairs) - reference_paths))
    others: dict[str, list[str]] = {}
    for b, a in pairs.items():
        others.setdefault(a, []).append(b)
    rules = ignore_rules(records[0]) if records else []
    findings = _Findings.of(comparison) if comparison is not None else None
    table = []
    for path in paths:
        per_run = []
        for record in records:
            name, entry = path, record.checkpoint(path)
            for other in others.get(path, []) if entry is None else []:
                if record.checkpoint(other) is not None:
                    name, entry = other, record.checkpoint(other)
                    break
            per_run.append(
                {
                    "run": str(record.run_dir),
                    "path": name if entry else None,
                    "file_sha256": entry.get("file_sha256") if entry else None,
                    "content_sha256": entry.get("content_sha256") if entry else None,
                }
            )
        entries = [
            record.checkpoint(cell["path"]) if cell["path"] else None
            for record, cell in zip(records, per_run, strict=True)
        ]
        in_database = findings is not None and path in findings.parts  # its database's row says
        status = IN_DATABASE if in_database else _status(path, per_run, entries, rules, findings)
        contents = {cell["content_sha256"] for cell in per_run}
        agreeing = status in AGREEING or (
            status in (IGNORED, MISSING) and len(contents) == 1 and None not in contents
        )
        table.append({"path": path, "identical": agreeing, "status": status, "runs": per_run})
    return table


class _Findings:
    """The files the comparison names, by what it found in them."""

    def __init__(
        self, real: set[str], unreadable: set[str], excused: set[str], resharded: set[str], parts: set[str]
    ) -> None:
        self.real, self.unreadable, self.excused, self.resharded = real, unreadable, excused, resharded
        self.parts = parts  # data files compared through their databases

    @classmethod
    def of(cls, c: Comparison) -> _Findings:
        real = {str(d.get("checkpoint")) for d in [*c.differences, *c.value_differences]}
        real |= {str(r.get("a")) for r in c.renamed}  # its row: the other runs' names are merged into it
        unreadable = {str(u.get("checkpoint")) for u in c.unreadable}
        excused = {str(e.get("checkpoint")) for e in c.run_specific if e.get("name") != WHOLE_FILE}
        resharded = {  # the index and every shard of each folder cut otherwise with equal content, any run
            f"{r['checkpoint']}/{name}".removeprefix("./")
            for r in c.resharded
            if not r["differing_tensors"] and not r["differing_values"]
            for name in [".metadata", *r["a"]["shards"], *r["b"]["shards"]]
        }
        return cls(real, unreadable, excused, resharded, set(c.database_parts))


def _status(
    path: str,
    cells: list[dict[str, Any]],
    entries: list[dict[str, Any] | None],
    rules: list[tuple[str, str | None]],
    found: _Findings | None,
) -> str:
    if ignored_by(rules, path, None) is not None:
        return IGNORED
    resharded = found is not None and path in found.resharded and path not in found.real
    if any(cell["path"] is None for cell in cells):
        return RESHARDED if resharded else MISSING  # a shard of one layout alone is the layout's
    if found is not None and path in found.real:  # a value, a tensor, or the file's very name
        return DIFFERS
    if len({cell["file_sha256"] for cell in cells}) == 1:
        return SAME
    if found is None:  # the hashes alone
        return EQUAL if len({cell["content_sha256"] for cell in cells}) == 1 else DIFFERS
    return RESHARDED if resharded else _compared_status(path, entries, rules, found)


def _compared_status(
    path: str, entries: list[dict[str, Any] | None], rules: list[tuple[str, str | None]], found: _Findings
) -> str:
    """A file whose bytes differ and that no listed difference names: a tensor past the listed ones,
    or why else its bytes may differ."""
    if _tensors_differ(path, entries, rules):
        return DIFFERS
    if path in found.unreadable:
        return UNREADABLE
    return RUN_SPECIFIC if path in found.excused else EQUAL


def _tensors_differ(
    path: str, entries: list[dict[str, Any] | None], rules: list[tuple[str, str | None]]
) -> bool:
    """The tensors' digests differ beyond their names: a difference past the listed ones' limit.

    Names alone may differ where they hold a run's own path (matched once masked), so only the tensors
    themselves (dtype, shape, bytes) are counted here, less those the job file ignores by name.
    """
    kept = [
        sorted(
            (str(t.get("dtype")), str(t.get("shape")), str(t.get("sha256")))
            for t in entry.get("tensors") or []
            if ignored_by(rules, path, str(t.get("name"))) is None
        )
        for entry in entries
        if entry is not None
    ]
    return any(tensors != kept[0] for tensors in kept[1:])
