"""The job file's `compare.ignore` rules, as the reference run recorded them: which output files, or
which values in them, are left out of the verdict, and the rule as written that says so."""

from __future__ import annotations

from fnmatch import fnmatchcase

from reprobox.records.manifest import RunRecord


def ignore_rules(record: RunRecord) -> list[tuple[str, str | None]]:
    rules = record.compare_ignore
    return [(str(r.get("file")), r.get("key")) for r in rules if isinstance(r, dict) and r.get("file")]


def ignored_by(rules: list[tuple[str, str | None]], path: str, name: str | None) -> str | None:
    """The rule (as written) that leaves this file, or this value in it, out of the verdict."""
    for file_glob, key_glob in rules:
        if not _path_matches(file_glob, path):
            continue
        if key_glob is None:
            return file_glob
        if name is not None and fnmatchcase(name, key_glob):
            return f"{file_glob}: {key_glob}"
    return None


def _path_matches(pattern: str, path: str) -> bool:
    return fnmatchcase(path, pattern) or (
        "/" not in pattern and fnmatchcase(path.rsplit("/", 1)[-1], pattern)
    )
