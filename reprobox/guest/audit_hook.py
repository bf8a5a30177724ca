"""Record each nondeterministic op torch warns about, at the line of job code that ran it.

Under `torch.use_deterministic_algorithms(True, warn_only=True)` torch warns, instead of raising,
when an op has no deterministic implementation: "<op> does not have a deterministic implementation,
but you set 'torch.use_deterministic_algorithms(True, warn_only=True)'. ..." (the same text from
ATen's `alertNotDeterministic` and from `torch._prims_common.alert_not_deterministic`). Python
attributes such a warning to the innermost Python frame, often inside torch (`torch/nn/functional.py`),
and shows it once per location; `install()` makes every one of them reach a wrapped
`warnings.showwarning`, which walks the stack out to the first frame of job code and appends one
JSON line per warning to the record file. Several processes (DataLoader workers, ranks) append to
the same file: each line goes out in one `write` on an `O_APPEND` descriptor, so lines never mix.

Warnings from the autograd engine surface at the `backward()` call that ran them. Code that later
replaces `warnings.showwarning` without chaining (`logging.captureWarnings(True)`) or puts an
"ignore" filter in front of ours hides warnings from the record.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import linecache
import os
import re
import sys
import sysconfig
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TextIO

# Matched (case-insensitively, from the start) against the warning text by the warnings filter.
NONDETERMINISTIC_MESSAGE = (
    r".+ does not have a deterministic implementation, but you set "
    r"'torch\.use_deterministic_algorithms\(True, warn_only=True\)'"
)
_OP = re.compile(r"(?P<op>.+?) does not have a deterministic implementation, but you set")

# A training loop runs the same op every step: past this many lines per (op, file, line) in one
# process the record only counts on, so the file stays small while every call site is still named.
MAX_RECORDS_PER_SITE = 100

ShowWarning = Callable[..., None]


class _AuditShowWarning:
    """The `warnings.showwarning` that `install()` puts in place; chains to the one it replaced."""

    def __init__(self, record_path: Path, previous: ShowWarning, max_per_site: int) -> None:
        self.record_path = record_path
        self.previous = previous
        self.max_per_site = max_per_site
        self._pid = os.getpid()
        self._seen: dict[tuple[str, str, int], int] = {}

    def __call__(  # noqa: PLR0917  (the signature warnings.showwarning has)
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        text = str(message)
        match = _OP.match(text)
        if match is None:
            self.previous(message, category, filename, lineno, file, line)
            return
        site_file, site_line, code = _job_site(filename, lineno)
        if os.getpid() != self._pid:  # a forked child starts its own counts
            self._pid, self._seen = os.getpid(), {}
        key = (match.group("op"), site_file, site_line)
        seen = self._seen[key] = self._seen.get(key, 0) + 1
        if seen <= self.max_per_site:
            record = {
                "op": key[0],
                "message": text,
                "file": site_file,
                "line": site_line,
                "code": code,
                "pid": self._pid,
            }
            _append_line(self.record_path, json.dumps(record, sort_keys=True) + "\n")
        if seen == 1:  # show each call site once per process, at the job's own line
            self.previous(message, category, site_file, site_line, file, None)


def install(record_path: Path, *, max_per_site: int = MAX_RECORDS_PER_SITE) -> None:
    """Record nondeterministic-op warnings of this process in `record_path` (JSON lines).

    Creates the file (and its folder) at once, so its presence tells the controller the audit ran
    even when no op warned. Installing again only points the recorder at the new path. Never raises
    for an unwritable path: the job must not fail because its audit could not be written.
    """
    warnings.filterwarnings("always", message=NONDETERMINISTIC_MESSAGE)
    current = warnings.showwarning
    if isinstance(current, _AuditShowWarning):
        current.record_path = record_path
        current.max_per_site = max_per_site
    else:
        warnings.showwarning = _AuditShowWarning(record_path, current, max_per_site)
    try:
        record_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    _append_line(record_path, "")


def uninstall() -> None:
    """Put back the `showwarning` that `install()` replaced, and show these warnings once per place again."""
    current = warnings.showwarning
    if isinstance(current, _AuditShowWarning):
        warnings.showwarning = current.previous
    warnings.filterwarnings("default", message=NONDETERMINISTIC_MESSAGE)


def _append_line(path: Path, text: str) -> None:
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return
    try:
        if text:
            os.write(descriptor, text.encode("utf-8"))
    except OSError:
        pass
    finally:
        os.close(descriptor)


# --- where in the job's code -----------------------------------------------------------------------


def _job_site(filename: str, lineno: int) -> tuple[str, int, str]:
    """File, line and source text of the innermost frame outside torch, reprobox and the stdlib."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not _is_library_file(path):
            line = frame.f_lineno
            return _display_path(path), line, linecache.getline(path, line, frame.f_globals).strip()
        frame = frame.f_back
    return _display_path(filename), lineno, linecache.getline(filename, lineno).strip()


def _display_path(path: str) -> str:
    return path if path.startswith("<") else str(Path(path).absolute())


@functools.lru_cache(maxsize=4096)
def _is_library_file(path: str) -> bool:
    """True for code the job did not write: torch, reprobox, and the standard library."""
    if path.startswith("<frozen "):
        return True
    if path.startswith("<"):
        return False  # <stdin>, <string>: code the user typed or exec'd
    real = os.path.realpath(path)
    own, stdlib, site = _library_roots()
    if any(_is_within(real, root) for root in own):
        return True
    return any(_is_within(real, root) for root in stdlib) and not any(_is_within(real, root) for root in site)


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(torch and reprobox, the stdlib folders, the site-packages folders inside them)."""
    own = [str(Path(__file__).resolve().parent.parent)]
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is not None and spec.submodule_search_locations:
        own.extend(os.path.realpath(location) for location in spec.submodule_search_locations)
    paths = sysconfig.get_paths()
    stdlib = {os.path.realpath(paths[key]) for key in ("stdlib", "platstdlib") if key in paths}
    site = {os.path.realpath(paths[key]) for key in ("purelib", "platlib") if key in paths}
    return tuple(own), tuple(sorted(stdlib)), tuple(sorted(site))


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


# --- reading the record ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditRecord:
    """One nondeterministic op at one line of job code, with how often it was recorded."""

    op: str
    file: str
    line: int
    code: str
    message: str
    count: int  # lines recorded (at most MAX_RECORDS_PER_SITE per process)
    pids: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "op": self.op,
            "file": self.file,
            "line": self.line,
            "code": self.code,
            "message": self.message,
            "count": self.count,
            "pids": list(self.pids),
        }

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.op} (recorded {self.count}x)"


def read_records(path: Path) -> list[AuditRecord]:
    """The records in `path`, one per (op, file, line) in order of first appearance.

    A missing file gives an empty list; lines that are not complete records (a process killed
    mid-write) are skipped.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    first: dict[tuple[str, str, int], _Line] = {}
    counts: dict[tuple[str, str, int], int] = {}
    pids: dict[tuple[str, str, int], set[int]] = {}
    for raw in text.splitlines():
        entry = _parse(raw)
        if entry is None:
            continue
        key = (entry.op, entry.file, entry.line)
        first.setdefault(key, entry)
        counts[key] = counts.get(key, 0) + 1
        pids.setdefault(key, set()).add(entry.pid)
    return [
        AuditRecord(
            op=entry.op,
            file=entry.file,
            line=entry.line,
            code=entry.code,
            message=entry.message,
            count=counts[key],
            pids=tuple(sorted(pids[key])),
        )
        for key, entry in first.items()
    ]


@dataclass(frozen=True)
class _Line:
    """One line of the record file, as `_AuditShowWarning` writes it."""

    op: str
    message: str
    file: str
    line: int
    code: str
    pid: int


def _parse(raw: str) -> _Line | None:
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(entry, dict):
        return None
    texts = [entry.get(name) for name in ("op", "message", "file", "code")]
    numbers = [entry.get(name) for name in ("line", "pid")]
    if not all(isinstance(t, str) for t in texts) or not all(type(n) is int for n in numbers):
        return None
    return _Line(
        op=entry["op"],
        message=entry["message"],
        file=entry["file"],
        line=entry["line"],
        code=entry["code"],
        pid=entry["pid"],
    )
