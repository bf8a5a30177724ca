"""Run-specific values grouped by kind, with counts: what a person reads instead of one line per value.

A TensorBoard file logs a wall-clock stamp with every scalar, and a throughput figure at every step: two
runs of a short job differ in hundreds of such values, each excused with its evidence. The verdict lists
them by kind ("121 wall-clock stamps in 2 files: ...; 4 duration or throughput figures in ...:
charts/SPS"), with one example each; every value stays listed in ``run_specific``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from reprobox.compare._marks import WHOLE_FILE

BY_NAME = " (judged by its name)"
SHOWN_NAMES = 3

# A reason's words -> the kind of value, singular and plural; the first that matches names it.
_KINDS: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), one, many)
    for pattern, one, many in (
        (r"folder name", "run-specific folder name", "run-specific folder names"),
        (r"concurrent writers", "log line of concurrent writers", "log lines of concurrent writers"),
        (r"file's own path|name part", "run name in the file's path", "run names in the files' paths"),
        (r"random run id|\brun id\b", "run id", "run ids"),
        (r"cut from its clock", "clock-derived id", "clock-derived ids"),
        (r"monotonic clock", "monotonic clock reading", "monotonic clock readings"),
        (r"counter of earlier runs", "run counter", "run counters"),
        (r"memory address", "memory address", "memory addresses"),
        (
            r"duration|throughput|per second|rate\b|elapsed|runtime",
            "duration or throughput figure",
            "duration or throughput figures",
        ),
        (r"clock|timestamp|\btime\b|date", "wall-clock stamp", "wall-clock stamps"),
        (r"host", "host name", "host names"),
        (r"process id|\bpid", "process id", "process ids"),
        (
            r"run's own|own director|own folder|own path",
            "path under the run's own folders",
            "paths under the run's own folders",
        ),
    )
)
_NUMBERED = re.compile(r"^(?:\d+|(?:step|epoch|iter|iteration|batch)_?\d+)$")


def run_specific_groups(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The excused values grouped by kind (and by whether their name alone excused them), largest first.

    Each group: ``kind`` (plural), ``count``, ``files``, ``names`` (series such as ``charts/SPS``, the
    step numbers folded), ``reasons`` as the values were excused, one ``example`` and the ``text`` shown.
    """
    groups: dict[tuple[str, bool, bool], dict[str, Any]] = {}  # files, names, reasons: dicts as ordered sets
    for entry in entries:
        reason = str(entry.get("reason") or "run-specific")
        file_name = entry.get("name") == WHOLE_FILE
        by_name = reason.endswith(BY_NAME) or entry.get("evidence") == "its name"
        one, many, listed = _kind(reason.removesuffix(BY_NAME).removeprefix("file name: "))
        if file_name:
            one, many = f"file name differing only by {listed}", f"file names differing only by {listed}"
        group = groups.setdefault(
            (many, by_name, file_name),
            {
                "kind": many,
                "one": one,
                "count": 0,
                "files": {},
                "names": {},
                "reasons": {},
                "by_name": by_name,
            },
        )
        group["count"] += 1
        group["files"][str(entry.get("checkpoint"))] = None
        group["names"][str(entry.get("a")) if file_name else series_name(str(entry.get("name")))] = None
        group["reasons"][reason] = None
        if "example" not in group and "a" in entry:
            group["example"] = {k: entry.get(k) for k in ("checkpoint", "name", "a", "b")}
    ordered = sorted(groups.values(), key=lambda g: (-g["count"], g["kind"]))
    for group in ordered:
        for key in ("files", "names", "reasons"):
            group[key] = list(group[key])
        group["text"] = _text(group)
        del group["one"]
    return ordered


def series_name(name: str) -> str:
    """A value's name with its step or row numbers folded: ``charts/SPS.step_1024`` -> ``charts/SPS``,
    ``log_history.3.train_runtime`` -> ``log_history.*.train_runtime``."""
    parts = ["*" if _NUMBERED.match(part) else part for part in name.split(".")]
    while len(parts) > 1 and parts[-1] == "*":
        parts.pop()
    return ".".join(parts)


@lru_cache(maxsize=256)  # a few reasons, repeated over thousands of values
def _kind(reason: str) -> tuple[str, str, str]:
    """The kind a reason names (singular, plural) and its parts' kinds listed: a reason of several parts
    ("a process id and the host name") names values holding each."""
    kinds = [_one_kind(part) for part in reason.split(" and ") if part] or [_one_kind(reason)]
    listed = _join(list(dict.fromkeys(many for _, many in kinds)))
    if len({many for _, many in kinds}) == 1:
        return kinds[0][0], kinds[0][1], listed
    return f"value holding {listed}", f"values holding {listed}", listed


def _one_kind(reason: str) -> tuple[str, str]:
    for pattern, one, many in _KINDS:
        if pattern.search(reason):
            return one, many
    return f"value ({reason})", f"values ({reason})"


def _text(group: dict[str, Any]) -> str:
    count, files, names = group["count"], group["files"], group["names"]
    noun = group["one"] if count == 1 else group["kind"]
    where = files[0] if len(files) == 1 else f"{len(files)} files"
    shown = ", ".join(names[:SHOWN_NAMES]) + (
        f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else ""
    )
    judged = ", judged by name" if group["by_name"] else ""
    if group["kind"].startswith("file names"):
        return f"{count} {noun}{judged}: {shown}"
    return f"{count} {noun} in {where}{judged}: {shown}"


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def ignored_groups(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the job file's compare: ignore left out, by rule: ``rule``, ``count``, ``files``, ``text``."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        groups.setdefault(str(entry.get("rule")), []).append(entry)
    found = []
    for rule, items in groups.items():
        files = list(dict.fromkeys(str(item.get("checkpoint")) for item in items))
        whole = sum(item.get("name") == WHOLE_FILE for item in items)
        values = len(items) - whole
        what = [_plural(whole, "file")] if whole else []
        if values:
            what.append(
                f"{_plural(values, 'value')} in {files[0] if len(files) == 1 else f'{len(files)} files'}"
            )
        text = f"{' and '.join(what)} by the rule {rule!r}"
        found.append({"rule": rule, "count": len(items), "files": files, "text": text})
    return sorted(found, key=lambda g: (-g["count"], g["rule"]))


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
