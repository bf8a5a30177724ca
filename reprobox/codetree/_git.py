"""What git says about a code folder: the files it would commit, the commit checked out, what changed.

git is asked, not re-implemented: `ls-files --cached --others --exclude-standard` applies every
.gitignore, .git/info/exclude and core.excludesFile exactly as the user's own `git add -A` would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Variables that point git at another repository than the folder's own.
_REDIRECTING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")
_TIMEOUT_S = 120


@dataclass(frozen=True)
class GitView:
    """git's account of a folder; every path is relative to the folder."""

    paths: list[
        str
    ]  # what `git add -A` would commit (a nested repository or submodule ends in "/" or is a folder)
    changed: list[str]  # what `git status` lists: modified, added, deleted, untracked
    commit: str | None  # None in a repository with no commit yet
    root: str  # the work tree's top folder


def git_view(folder: Path) -> GitView | None:
    """None when the folder is not in a work tree, git is not installed or refuses the repository, or
    git ignores the folder itself (then nothing in it would be committed: the folder's own rules apply)."""
    if shutil.which("git") is None:
        return None
    located = _git(folder, "rev-parse", "--show-toplevel", "--show-prefix")  # one line each, in order
    top, _, prefix = (located or "").partition("\n")
    if not top.strip():
        return None
    if _git(folder, "check-ignore", "-q", ".") is not None:  # exit 0: the folder is ignored
        return None
    listing = _git(folder, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    status = _git(folder, "status", "--porcelain", "-z", "--untracked-files=all", "--", ".")
    if listing is None or status is None:
        return None
    commit = _git(folder, "rev-parse", "--verify", "-q", "HEAD")
    return GitView(
        paths=sorted({p for p in listing.split("\0") if p}),
        changed=_status_paths(status, prefix.strip()),
        commit=commit.strip() if commit else None,
        root=top.strip(),
    )


def _status_paths(status: str, prefix: str) -> list[str]:
    """Paths of `git status --porcelain -z` ("XY path", a rename's source follows as its own field),
    made relative to the folder (porcelain paths are relative to the top of the work tree)."""
    paths: list[str] = []
    fields = iter(status.split("\0"))
    for entry in fields:
        if len(entry) < 4:
            continue
        if entry[0] in "RC":
            next(fields, None)  # the rename's or copy's source
        path = entry[3:]
        if path.startswith(prefix):
            paths.append(path[len(prefix) :])
    return paths


def git_environment() -> dict[str, str]:
    """This process's environment less the variables that would point git at another repository, and
    with git's optional locks off: reading must not take the index lock of the user's own git."""
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTING}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    return env


def _git(folder: Path, *args: str) -> str | None:
    """git's stdout, or None when it failed."""
    env = git_environment()
    command = ["git", "-C", str(folder), *args]
    try:
        done = subprocess.run(
            command, capture_output=True, env=env, timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", errors="surrogateescape")
