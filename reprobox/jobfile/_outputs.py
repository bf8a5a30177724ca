"""What the job leaves: which outputs are checkpoints, how often its trail is written, and what a
comparison of two runs' outputs ignores."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from reprobox.jobfile._checker import Checker, describe
from reprobox.jobfile.schema import CompareSpec, IgnoreRule, Trail


def check_checkpoints(c: Checker, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        c.fail("checkpoints", "must be a list of glob patterns such as ['*.pt']")
        return ()
    for index, pattern in enumerate(value):
        parts = PurePosixPath(pattern).parts
        if pattern.startswith("/") or ".." in parts or "\\" in pattern:
            c.fail(
                f"checkpoints.{index}",
                f"'{pattern}' points outside the output directory; use a pattern relative to it, "
                "e.g. 'model/*.pt'",
            )
    return tuple(value)


def check_trail(c: Checker, value: Any) -> Trail | None:
    entry = c.mapping(value, "trail")
    if entry is None:
        return None
    c.check_keys(entry, ("every",), "trail")
    every = entry.get("every", 1)
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        c.fail("trail.every", f"must be a positive number of optimizer steps, not {describe(every)}")
        return None
    return Trail(every=every)


def check_compare(c: Checker, value: Any) -> CompareSpec:
    entry = c.mapping(value, "compare")
    if entry is None:
        return CompareSpec()
    c.check_keys(entry, ("ignore",), "compare")
    rules = entry.get("ignore", [])
    if not isinstance(rules, list):
        c.fail(
            "compare.ignore",
            f"must be a list of file globs or {{file, key}} mappings, not {describe(rules)}",
        )
        return CompareSpec()
    found = []
    for index, given in enumerate(rules):
        dotted = f"compare.ignore.{index}"
        rule = {"file": given} if isinstance(given, str) else given
        if not isinstance(rule, dict):
            c.fail(dotted, f"must be a file glob or a {{file, key}} mapping, not {describe(rule)}")
            continue
        c.check_keys(rule, ("file", "key"), dotted)
        file_glob, key_glob = rule.get("file"), rule.get("key")
        if (
            not isinstance(file_glob, str)
            or not file_glob
            or file_glob.startswith("/")
            or ".." in file_glob.split("/")
        ):
            c.fail(
                f"{dotted}.file",
                "must be a glob relative to the outputs folder such as '*.log' (no leading '/' or '..')",
            )
            continue
        if key_glob is not None and (not isinstance(key_glob, str) or not key_glob):
            c.fail(f"{dotted}.key", "must be a glob over value names such as 'log_history.*.train_runtime'")
            continue
        found.append(IgnoreRule(file=file_glob, key=key_glob))
    return CompareSpec(ignore=tuple(found))
