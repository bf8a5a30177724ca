"""What git says about a code folder: the files it would commit, the commit checked out, and dirtiness.

git is asked, not re-implemented: `ls-files --cached --others --exclude-standard` applies every
.gitignore, .git/info/exclude and core.excludesFile exactly as the user's own `git add -A` would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from reprobox.codetree._tree import GitFacts

# Variables that point git at another repository than the folder's own.
_REDIRECTING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")
_TIMEOUT_S = 120


def git_listing(folder: Path) -> tuple[list[str], GitFacts] | None:
    """The paths git would commit under `folder` (relative to it), and the git facts; None when the
    folder is not in a work tree, git is not installed or refuses the repository, or git ignores the
    folder itself (then nothing in it would be committed, and the folder's own rules apply)."""
    if shutil.which("git") is None:
        return None
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top is None or not top.strip():
        return None
    if _git(folder, "check-ignore", "-q", ".") is not None:  # exit 0: the folder is ignored
        return None
    listing = _git(folder, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    status = _git(folder, "status", "--porcelain", "--", ".")
    if listing is None or status is None:
        return None
    commit = _git(folder, "rev-parse", "--verify", "-q", "HEAD")
    facts = GitFacts(commit=commit.strip() if commit else None, dirty=bool(status.strip()), root=top.strip())
    paths = sorted({p for p in listing.split("\0") if p})
    return paths, facts


def _git(folder: Path, *args: str) -> str | None:
    """git's stdout, or None when it failed."""
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTING}
    env["GIT_OPTIONAL_LOCKS"] = "0"  # `git status` must not take the index lock of the user's own git
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
