"""What a comparison compared: how many tensors and values, in which files, and which files that hold
tensors it could not compare (ignored by the job file, or in a format reprobox cannot read).

A verdict is a claim about what was compared and nothing more. "Every tensor and value is equal" needs
tensors compared; when every file that holds them was left out, a verdict over the small files left (a
config echoed back, a metrics file) would speak for a model nobody looked at. A job that saves only
values (a tokenizer, a metrics file) holds no tensors at all, and its verdict says so.

Which files hold tensors is read from the records: a file whose tensors were read in some run, or one the
readers could not take apart whose name or type is a checkpoint's (``model.zip``, ``policy.pth``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from reprobox.compare._ignore import ignore_rules, ignored_by
from reprobox.compare._marks import IGNORED, IN_DATABASE, MISSING, UNREADABLE
from reprobox.compare._unreadable import described, may_hold_tensors
from reprobox.records.manifest import RunRecord


@dataclass
class Coverage:
    """What the verdict covers, counted in the reference run's files (``compared`` in --json)."""

    tensors: int = 0  # tensors compared (in files not ignored, read in every run)
    values: int = 0  # non-tensor values compared
    files: int = 0  # files compared, whatever they hold
    tensor_files: list[str] = field(default_factory=list)  # compared files that hold tensors
    ignored_tensor_files: list[dict[str, str]] = field(default_factory=list)  # {"file", "rule"}
    unreadable_tensor_files: list[str] = field(default_factory=list)  # differ, cannot be read

    @property
    def holds_tensors(self) -> bool:
        """Whether any output holds tensors, compared or not."""
        return bool(self.tensor_files or self.ignored_tensor_files or self.unreadable_tensor_files)

    @property
    def no_tensor_compared(self) -> bool:
        """The outputs hold tensors and none of them was compared: no verdict can be given."""
        return self.holds_tensors and not self.tensor_files

    def text(self) -> str:
        """What was compared, in a few words: ``16 tensors and 22 values in 3 files``."""
        files = _count(self.files, "file")
        if self.holds_tensors:
            return f"{_count(self.tensors, 'tensor')} and {_count(self.values, 'value')} in {files}"
        if not self.values:
            return f"{files} compared line by line or as bytes; no tensors"
        return f"{_count(self.values, 'value')} in {files}; no tensors"

    def to_json(self) -> dict[str, Any]:
        return {
            "tensors": self.tensors,
            "values": self.values,
            "files": self.files,
            "tensor_files": self.tensor_files,
            "ignored_tensor_files": self.ignored_tensor_files,
            "unreadable_tensor_files": self.unreadable_tensor_files,
            "text": self.text(),
        }


def coverage_of(
    records: Sequence[RunRecord], table: Sequence[dict[str, Any]], unreadable: Sequence[dict[str, Any]]
) -> Coverage | None:
    """Count what the rows of the checkpoint table (see ``_table``) put into the verdict; None when a
    record does not say how its files were read (no ``format``: it cannot tell what they hold)."""
    if any("format" not in entry for record in records for entry in record.checkpoints):
        return None
    rules = ignore_rules(records[0])
    kinds = {str(u.get("checkpoint")): str(u.get("type")) for u in unreadable}
    found = Coverage()
    for row in table:
        path, status = str(row["path"]), row.get("status")
        entries = [
            record.checkpoint(cell["path"])
            for record, cell in zip(records, row["runs"], strict=True)
            if cell.get("path")
        ]
        tensors = any(entry.get("tensors") for entry in entries if entry) or (
            any(entry.get("format") == "file" for entry in entries if entry)
            and may_hold_tensors(path, kinds.get(path))
        )
        if status in (MISSING, IN_DATABASE):  # a database's data file: counted in its manifest's row
            continue
        if status == IGNORED:
            if tensors:
                found.ignored_tensor_files.append({"file": path, "rule": str(ignored_by(rules, path, None))})
            continue
        if status == UNREADABLE:
            if tensors:
                found.unreadable_tensor_files.append(path)
            continue
        reference = entries[0] or {}
        found.files += 1
        found.tensors += sum(
            ignored_by(rules, path, str(t.get("name"))) is None for t in reference.get("tensors") or []
        )
        found.values += sum(ignored_by(rules, path, key) is None for key in reference.get("metadata") or {})
        if tensors:
            found.tensor_files.append(path)
    return found


def equal_text(coverage: Coverage | None, across: str) -> str:
    """What was found equal, as compared: tensors only where tensors were compared, else the count of
    what was (``every value is equal (25 values in 2 files; no tensors)``)."""
    if coverage is None:  # an older record does not say what its files held
        return f"every compared output is equal{across}"
    if coverage.tensors:
        return f"every tensor and value is equal{across}"
    what = "every value" if coverage.values else "every compared file"
    return f"{what} is equal{across} ({coverage.text()})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def no_tensor_sentence(coverage: Coverage, unreadable: Sequence[dict[str, Any]]) -> str:
    """Why there is no verdict when the files that hold tensors were all left out, naming them, and what
    would give one (never to ignore the model)."""
    left_out, fixes = [], []
    if coverage.ignored_tensor_files:
        named = ", ".join(f"{f['file']} (rule {f['rule']!r})" for f in coverage.ignored_tensor_files[:3])
        left_out.append(f"ignored by the job file: {named}{_more(coverage.ignored_tensor_files)}")
        fixes.append("take the model out of compare: ignore")
    models = [u for u in unreadable if str(u.get("checkpoint")) in coverage.unreadable_tensor_files]
    if models:
        named = "; ".join(described(entry) for entry in models[:3])
        left_out.append(f"in a format reprobox cannot read, and differing: {named}{_more(models)}")
        fixes.append(
            "save the weights in a format reprobox reads as well (torch.save of a state_dict, safetensors, "
            "NumPy)"
        )
    others = [str(u.get("checkpoint")) for u in unreadable if u not in models]
    besides = (
        f" ({', '.join(others[:3])}{_more(others)}, which cannot be read either, "
        f"differ{'s' if len(others) == 1 else ''} too)"
        if others
        else ""
    )
    compared = f"{_count(coverage.values, 'value')} in {_count(coverage.files, 'file')}"
    return (
        f"no tensor was compared: every file that holds tensors is {' or '.join(left_out)}; only {compared} "
        f"{'was' if coverage.values == 1 else 'were'} compared{besides}, and they say nothing of the model: "
        f"{', or '.join(fixes)}"
    )


def _more(items: Sequence[object]) -> str:
    return f" and {len(items) - 3} more" if len(items) > 3 else ""
