"""What a comparison says: the verdict names, the grades, and the Comparison shaped like --json."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reprobox.compare._summary import ignored_groups, run_specific_groups

if TYPE_CHECKING:
    from reprobox.compare._coverage import Coverage

IDENTICAL = "identical"
DIFFERENT = "different"
FAILED = "failed"
BIT_IDENTICAL = "bit-identical"
REPRODUCED = "reproduced"
NOT_REPRODUCIBLE = "not reproducible"
NO_VERDICT = "no verdict"
TENSOR_DETAIL_LIMIT = 20
EXPLAINED_FIELDS_LIMIT = 30
CLAIMS = "claims"  # where a claimed number's difference is listed (it may come from no checkpoint)


@dataclass
class Comparison:
    """The answer to "are these runs the same?", shaped like the CLI's --json output."""

    verdict: str
    runs: list[str]
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    differences: list[dict[str, Any]] = field(default_factory=list)
    differing_tensor_total: int = 0
    notes: list[str] = field(default_factory=list)
    first_divergence: dict[str, Any] | None = None
    explanation: dict[str, Any] | None = None
    grade: str = ""
    sentence: str = ""
    value_differences: list[dict[str, Any]] = field(default_factory=list)  # real: name, a, b
    run_specific: list[dict[str, Any]] = field(default_factory=list)  # excused, each with its reason
    ignored: list[dict[str, Any]] = field(default_factory=list)  # left out by the job's compare.ignore
    renamed: list[dict[str, Any]] = field(default_factory=list)  # same content under other file names
    format_only: list[str] = field(default_factory=list)  # same tensors and values, other file bytes
    resharded: list[dict[str, Any]] = field(default_factory=list)  # DCP folders cut otherwise (_reshard)
    database_parts: list[str] = field(default_factory=list)  # data files compared through their database
    one_sided: list[dict[str, Any]] = field(default_factory=list)  # real: checkpoint, the run that wrote it
    unreadable: list[dict[str, Any]] = field(default_factory=list)  # differ, format unknown: no verdict
    compared_files: int = 0  # outputs whose content was compared (equal bytes count): none is no verdict
    coverage: Coverage | None = None  # what was compared: tensors, values, files (see _coverage)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "verdict": self.verdict,
            "grade": self.grade,
            "sentence": self.sentence,
            "runs": self.runs,
            "checkpoints": self.checkpoints,
            "differences": self.differences,
            "differing_tensors": self.differing_tensor_total,
            "value_differences": self.value_differences,
            "run_specific": self.run_specific,
            "ignored": self.ignored,
            "renamed_files": self.renamed,
            "format_only": self.format_only,
            "resharded": self.resharded,
            "database_parts": self.database_parts,
            "one_sided_files": self.one_sided,
            "unreadable_files": self.unreadable,
            "compared_files": self.compared_files,
            "notes": self.notes,
        }
        if self.coverage is not None:
            data["compared"] = self.coverage.to_json()
        if self.run_specific:  # the per-value lists stay above: scripts read either
            data["run_specific_summary"] = run_specific_groups(self.run_specific)
        if self.ignored:
            data["ignored_summary"] = ignored_groups(self.ignored)
        if self.first_divergence is not None:
            data["first_divergence"] = self.first_divergence
        if self.explanation is not None:
            data["explanation"] = self.explanation
        return data
