"""Static scan of a job's code for known sources of run-to-run differences.

Seeding and deterministic flags, which the guest applies, cannot fix code that picks a seed from the
clock, iterates a set to number a vocabulary, calls an op whose CUDA kernel adds in no fixed order, or
calls a library that does its own unordered work (tokenizers' WordPiece trainer numbers its vocabulary
in Rust hash-map order). This package finds such code before a run, with pure `ast` (neither torch nor
any other library of the job is imported), so that `reprobox audit` can name the file, the line and the
fix. What each hazard is and how to fix it is data (`RULES`, in `_rules`); which calls are hazards is
data too (`CALL_RULES`, `ASSIGN_RULES`, in `_call_rules`, their conditions in `_call_conditions` and, for
libraries beyond torch, `_library_conditions`).

Matching is deliberately cheap and quiet: callees are resolved through the file's own imports
(`import torch.nn.functional as F`, `from torch import nn`, `from torch.utils.data import DataLoader
as DL`); a tensor method such as `x.index_add_(...)` matches on any receiver except a module imported
from another library (`np.bincount` is not flagged); anything not understood is left alone. Some rules
are heuristics, each described in its own module: reading a `torch.empty` result before filling it
(`_empty_reads`), building an ordered thing from a set (`_set_order`) or from a directory listing or
results in completion order (`_unordered`), run-specific values in file names and outputs
(`_run_values`), and tokenizers objects trained with their own trainer (`_tokenizers`); `_scanner` walks
each file once and hands them what they check. Assignments to torch settings (`cudnn.benchmark = ...`)
are judged once the whole file is read: a later assignment of the safe value wins over an earlier unsafe
one (`_Scanner._report_settings`). Calls whose options hide in `**kwargs` are reported as unchecked, not
as missing. A finding is silenced by a `# reprobox: ignore` comment on its line, or by
`# reprobox: ignore[rule-a, rule-b]`.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import os
import re
from collections.abc import Sequence
from pathlib import Path

from reprobox.errors import UsageError
from reprobox.hazards._call_rules import (
    ASSIGN_RULES,
    CALL_RULES,
)
from reprobox.hazards._rules import (
    COVERED_BY_REPROBOX,
    RULES,
    WARNING,
    Finding,
)
from reprobox.hazards._scanner import (
    _Scanner,
)

__all__ = [
    "ASSIGN_RULES",
    "CALL_RULES",
    "COVERED_BY_REPROBOX",
    "DEFAULT_EXCLUDE",
    "RULES",
    "WARNING",
    "Finding",
    "scan_source",
    "scan_tree",
]

DEFAULT_EXCLUDE: tuple[str, ...] = (".git", ".venv", "venv", "__pycache__", "node_modules")

# Silences findings on its line: `# reprobox: ignore` (every rule) or `# reprobox: ignore[rule-a, ...]`.
_IGNORE_COMMENT = re.compile(r"#\s*reprobox:\s*ignore(?:\[(?P<rules>[^\]]*)\])?")


def _suppressed(finding: Finding, lines: Sequence[str]) -> bool:
    if not 1 <= finding.line <= len(lines):
        return False
    match = _IGNORE_COMMENT.search(lines[finding.line - 1])
    if match is None:
        return False
    listed = match.group("rules")
    return listed is None or finding.rule in {r.strip() for r in listed.split(",")}


def _sort_key(finding: Finding) -> tuple[str, int, int, str]:
    return finding.path, finding.line, finding.column, finding.rule


# ---------------------------------------------------------------------------------------------------
# Public entry points


def scan_source(source: str, path: str) -> list[Finding]:
    """Hazards in one file's source text; `path` is only used to label the findings."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as error:
        reason = f"{error.msg}, line {error.lineno}" if error.lineno else error.msg
        return [_file_finding(path, "syntax-error", reason, error.lineno or 1, error.offset or 1)]
    except (ValueError, RecursionError, MemoryError) as error:
        return [_file_finding(path, "syntax-error", str(error) or type(error).__name__)]
    scanner = _Scanner(path, tree)
    try:
        scanner.visit(tree)
    except RecursionError:
        return [_file_finding(path, "syntax-error", "nested too deeply to analyse")]
    lines = source.splitlines()
    unique = {(f.line, f.column, f.rule): f for f in scanner.findings if not _suppressed(f, lines)}
    return sorted(unique.values(), key=_sort_key)


def scan_tree(code_dir: Path, *, exclude: Sequence[str] = DEFAULT_EXCLUDE) -> list[Finding]:
    """Hazards in every `.py` file under `code_dir`, skipping folders whose name matches `exclude`.

    `exclude` entries are folder or file names, or shell patterns (`build*`), matched against each
    path component; paths in the findings are relative to `code_dir`, with forward slashes.
    """
    if not code_dir.is_dir():
        raise UsageError(
            f"code directory {code_dir} does not exist or is not a folder; pass the folder that holds the "
            "job's Python code"
        )
    findings: list[Finding] = []
    for folder, dirnames, filenames in os.walk(code_dir):
        dirnames[:] = sorted(d for d in dirnames if not _excluded(d, exclude))
        for filename in sorted(filenames):
            if not filename.endswith(".py") or _excluded(filename, exclude):
                continue
            file_path = Path(folder) / filename
            relative = file_path.relative_to(code_dir).as_posix()
            try:
                source = importlib.util.decode_source(file_path.read_bytes())
            except OSError as error:
                findings.append(_file_finding(relative, "unreadable-file", error.strerror or str(error)))
                continue
            except (UnicodeDecodeError, SyntaxError) as error:
                findings.append(_file_finding(relative, "syntax-error", f"cannot decode it: {error}"))
                continue
            findings.extend(scan_source(source, relative))
    return sorted(findings, key=_sort_key)


def _excluded(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _file_finding(path: str, rule_id: str, detail: str, line: int = 1, column: int = 1) -> Finding:
    rule = RULES[rule_id]
    return Finding(
        path=path,
        line=line,
        column=max(column, 1),
        rule=rule.id,
        message=rule.message.format(detail=detail),
        fix=rule.fix,
        severity=rule.severity,
    )
