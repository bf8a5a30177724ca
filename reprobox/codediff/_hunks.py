"""What changed between the two versions, as git's hunks, and where a line of one version lies in the other.

The op logs name source lines as the job saw them (`model.py:41`, relative to the code folder); git
names the same files relative to the code folder too (`git diff --relative`). A line of version A maps
to version B by the hunks above it; a line inside a hunk is inside the change, and `git blame` names
the commit that last touched it when the range spans several commits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from reprobox.codediff._revisions import Repository, Revision, run_git

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_COMMIT = "0" * 40


@dataclass(frozen=True)
class Hunk:
    """One changed region: lines [a_start, a_start + a_count) of A became [b_start, b_start + b_count)
    of B (a count of 0: the region is empty on that side, after line *_start)."""

    path_a: str
    path_b: str
    a_start: int
    a_count: int
    b_start: int
    b_count: int

    def holds_b(self, line: int) -> bool:
        return self.b_start <= line < self.b_start + self.b_count

    def holds_a(self, line: int) -> bool:
        return self.a_start <= line < self.a_start + self.a_count

    def text(self) -> str:
        was = _span(self.a_start, self.a_count)
        if self.path_a != self.path_b:
            was = f"{self.path_a} {was}"
        return f"{self.path_b} {_span(self.b_start, self.b_count)} (was {was})"

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.path_b,
            "lines": [self.b_start, self.b_start + max(self.b_count, 1) - 1],
            "file_a": self.path_a,
            "lines_a": [self.a_start, self.a_start + max(self.a_count, 1) - 1],
        }


def _span(start: int, count: int) -> str:
    if count == 0:
        return f"nothing, after line {start}"
    return f"line {start}" if count == 1 else f"lines {start}-{start + count - 1}"


@dataclass
class Changes:
    """Every hunk between the two versions of the code folder, by file."""

    hunks: list[Hunk] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # every file that differs, as B names it

    def hunk_of(self, source_a: str | None, source_b: str | None) -> Hunk | None:
        """The hunk holding an operation's source line in B (or, for a line only A has, in A)."""
        for source, holds in ((source_b, Hunk.holds_b), (source_a, Hunk.holds_a)):
            path, line = split_source(source)
            if path is None or line is None:
                continue
            side = "path_b" if holds is Hunk.holds_b else "path_a"
            for hunk in self.hunks:
                if getattr(hunk, side) == path and holds(hunk, line):
                    return hunk
        return None

    def map_line(self, source_a: str) -> str | None:
        """Where a line of A is in B (`file:line`), or None when the change rewrote it."""
        path, line = split_source(source_a)
        if path is None or line is None:
            return None
        shift, renamed = 0, path
        for hunk in self.hunks:
            if hunk.path_a != path:
                continue
            renamed = hunk.path_b
            if hunk.holds_a(line):
                return None
            if (hunk.a_count and hunk.a_start > line) or (not hunk.a_count and hunk.a_start >= line):
                break
            shift += hunk.b_count - hunk.a_count
        return f"{renamed}:{line + shift}"


def split_source(source: str | None) -> tuple[str | None, int | None]:
    if not source:
        return None, None
    path, _, line = source.rpartition(":")
    return (path, int(line)) if path and line.isdigit() else (None, None)


def changes_between(repo: Repository, a: Revision, b: Revision) -> Changes:
    """git's hunks from A to B (B the working tree: uncommitted and untracked files included)."""
    assert a.commit is not None
    revisions = [a.commit] if b.commit is None else [a.commit, b.commit]
    text = repo.git(
        "-c",
        "core.quotePath=false",
        "diff",
        "-U0",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--find-renames",
        "--relative",
        *revisions,
        "--",
        ".",
    )
    changes = parse_diff(text)
    if b.commit is None:  # files git does not track yet are new in B from their first line
        for path in repo.git("ls-files", "--others", "--exclude-standard", "-z", "--", ".").split("\0"):
            if path:
                changes.files.append(path)
                changes.hunks.append(Hunk("/dev/null", path, 0, 0, 1, 1 << 30))
    return changes


def parse_diff(text: str) -> Changes:
    """Hunks of `git diff -U0` output, each with its file's names on both sides."""
    changes = Changes()
    path_a = path_b = ""
    for line in text.splitlines():
        if line.startswith("diff --git "):
            path_a = path_b = ""
        elif line.startswith("--- "):
            path_a = _path(line[4:], "a/")
        elif line.startswith("+++ "):
            path_b = _path(line[4:], "b/")
            changes.files.append(path_b if path_b != "/dev/null" else path_a)
        elif line.startswith("@@"):
            match = _HUNK.match(line)
            if match:
                a_start, a_count, b_start, b_count = match.groups()
                changes.hunks.append(
                    Hunk(
                        path_a or path_b,
                        path_b or path_a,
                        int(a_start),
                        1 if a_count is None else int(a_count),
                        int(b_start),
                        1 if b_count is None else int(b_count),
                    )
                )
    return changes


def _path(name: str, side: str) -> str:
    name = name.strip()
    if name == "/dev/null":
        return name
    return name.removeprefix(side)


def touched_by(repo: Repository, a: Revision, b: Revision, source_b: str | None) -> dict[str, str] | None:
    """The commit between A and B that last touched this line of B (`uncommitted` in the working tree)."""
    path, line = split_source(source_b)
    if path is None or line is None:
        return None
    revision = [] if b.commit is None else [b.commit]
    done = repo.git("blame", "--porcelain", "-L", f"{line},{line}", *revision, "--", path, check=False)
    first = done.split("\n", 1)[0].split(" ")
    commit = first[0] if first and len(first[0]) == 40 else None
    if commit is None:
        return None
    if commit == _NO_COMMIT:
        return {"commit": "uncommitted", "summary": "not committed yet"}
    assert a.commit is not None
    if _is_ancestor(repo, commit, a.commit):
        return None  # the line is older than A: it did not change between the versions
    summary = next((x[8:] for x in done.splitlines() if x.startswith("summary ")), "")
    return {"commit": commit, "summary": summary}


def _is_ancestor(repo: Repository, commit: str, of: str) -> bool:
    return run_git(repo.code, "merge-base", "--is-ancestor", commit, of).returncode == 0
