"""Which output file of one run goes with which of the other's: the same path, a path equal once the
run's own facts are masked, files under folders that pair file for file, or the same content under
another name; what is left is present in one run only. Each pairing that is not by the same path is
listed, with why, in the Comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reprobox.compare._databases import database_parts
from reprobox.compare._ignore import ignored_by
from reprobox.compare._marks import WHOLE_FILE
from reprobox.compare._model import DIFFERENT, Comparison
from reprobox.records.manifest import RunRecord
from reprobox.runspecific import (
    PAIRED_FOLDER,
    RunContext,
    StructuralPairs,
    mask_file_name,
    pair_by_structure,
)


@dataclass(frozen=True)
class Side:
    """One run of a pair: its record and what names it rather than its results."""

    record: RunRecord
    context: RunContext

    @classmethod
    def of(cls, record: RunRecord) -> Side:
        return cls(record, RunContext.from_record(str(record.run_dir), record.data))


@dataclass
class FilePairing:
    """The pairing of two runs' files; ``structure`` holds the folders paired file for file once
    ``pairs`` has run."""

    a: Side
    b: Side
    rules: list[tuple[str, str | None]]
    out: Comparison
    structure: StructuralPairs = field(default_factory=StructuralPairs)

    def pairs(self) -> list[tuple[str, str]]:
        """Same path, or paths equal once run-specific parts are masked; the rest said plainly:
        same content under another name (a uuid), or present in one run only."""
        a, b, out = self.a, self.b, self.out
        parts_a, parts_b = database_parts(a.record), database_parts(b.record)
        out.database_parts.extend(sorted((parts_a | parts_b) - set(out.database_parts)))
        paths_a = {c["path"] for c in a.record.checkpoints} - parts_a  # compared through their databases
        paths_b = {c["path"] for c in b.record.checkpoints} - parts_b
        pairs = [(p, p) for p in sorted(paths_a & paths_b)]
        rest_a, rest_b = sorted(paths_a - paths_b), sorted(paths_b - paths_a)
        names_b = {path: mask_file_name(path, b.context) for path in rest_b}
        masked_b: dict[str, list[str]] = {}
        for path, (masked, _) in names_b.items():
            masked_b.setdefault(masked, []).append(path)
        for path in list(rest_a):
            masked, reasons = mask_file_name(path, a.context)
            matches = masked_b.get(masked, [])
            if len(matches) == 1:
                other = matches.pop()
                pairs.append((path, other))
                rest_a.remove(path)
                rest_b.remove(other)
                why = " and ".join(sorted(reasons | names_b[other][1]))
                out.run_specific.append(
                    {
                        "checkpoint": path,
                        "name": WHOLE_FILE,
                        "a": path,
                        "b": other,
                        "reason": f"file name: {why}",
                        "evidence": "the run's own record",
                    }
                )
        pairs += self.paired_by_structure(rest_a, rest_b)
        by_content_b: dict[str, list[str]] = {}
        for path in rest_b:
            by_content_b.setdefault(_content_of(b.record, path), []).append(path)
        for path in list(rest_a):
            matches = by_content_b.get(_content_of(a.record, path), [])
            if matches:
                other = matches.pop(0)
                rest_a.remove(path)
                rest_b.remove(other)
                out.renamed.append({"a": path, "b": other, "same_content": True})
                out.verdict = DIFFERENT
        for path in rest_a + rest_b:
            where = a.record.run_dir if path in rest_a else b.record.run_dir
            rule = ignored_by(self.rules, path, None)
            if rule is not None:
                out.ignored.append(
                    {"checkpoint": path, "name": WHOLE_FILE, "rule": rule, "why": f"only in {where}"}
                )
                continue
            out.verdict = DIFFERENT
            out.one_sided.append({"checkpoint": path, "run": str(where)})
            out.notes.append(f"checkpoint {path} exists only in {where}")
        return pairs

    def paired_by_structure(self, rest_a: list[str], rest_b: list[str]) -> list[tuple[str, str]]:
        """Files under folders whose names differ while what lies under them pairs file for file (their
        names compared with the run's own facts masked); each paired file is listed, with its folder."""
        masked_a = _unique_masks(rest_a, self.a.context)
        masked_b = _unique_masks(rest_b, self.b.context)
        self.structure = pair_by_structure(masked_a, masked_b)
        pairs: list[tuple[str, str]] = []
        for name_a, name_b in self.structure.files:
            path_a, path_b = masked_a[name_a], masked_b[name_b]
            rest_a.remove(path_a)
            rest_b.remove(path_b)
            pairs.append((path_a, path_b))
            folder = max(  # the innermost paired folder it lies under
                (f for f in self.structure.folders if name_a.startswith(f.a + "/")), key=lambda f: len(f.a)
            )
            self.out.run_specific.append(
                {
                    "checkpoint": path_a,
                    "name": WHOLE_FILE,
                    "a": path_a,
                    "b": path_b,
                    "reason": f"file name: {PAIRED_FOLDER}",
                    "evidence": "the runs' output folders",
                    "folder": {"a": _leading(path_a, folder.a), "b": _leading(path_b, folder.b)},
                }
            )
        return pairs


def _content_of(record: RunRecord, path: str) -> str:
    return str((record.checkpoint(path) or {}).get("content_sha256"))


def _leading(path: str, masked_folder: str) -> str:
    """The folder of ``path`` that its masked name ``masked_folder`` stands for (as many parts)."""
    return "/".join(path.split("/")[: masked_folder.count("/") + 1])


def _unique_masks(paths: list[str], context: RunContext) -> dict[str, str]:
    """Masked name -> path, for the names no other path of the run masks to."""
    found: dict[str, list[str]] = {}
    for path in paths:
        found.setdefault(mask_file_name(path, context)[0], []).append(path)
    return {masked: group[0] for masked, group in found.items() if len(group) == 1}
