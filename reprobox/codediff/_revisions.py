"""The two versions of the code a diff runs: a commit (exported from git, never checked out) or the
working tree as it is now, uncommitted changes included.

The user's checkout is only read: a commit's files come from `git archive` into a scratch folder,
which becomes a content-addressed snapshot like any verify's (`codetree.snapshot_code`), so a commit
whose tree equals the working tree's runs from the same snapshot.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from reprobox import codetree
from reprobox.errors import EnvironmentProblem, UsageError

WORKING_TREE = "working tree"
_TIMEOUT_S = 300
ARCHIVE_LIMIT = 4 << 30  # a code tree larger than this is data checked in by mistake, not code


@dataclass(frozen=True)
class Repository:
    """The git work tree holding the job's code folder; `prefix` is the code folder inside it ("" or
    "sub/dir/"), since git names paths from the top and the job's source lines from the code folder."""

    code: Path
    top: Path
    prefix: str

    def git(self, *args: str, check: bool = True) -> str:
        """git's stdout, run in the code folder; a failure raises with git's own message."""
        done = run_git(self.code, *args)
        if check and done.returncode != 0:
            message = done.stderr.decode(errors="replace").strip().splitlines()
            raise EnvironmentProblem(
                f"git {' '.join(args)} failed in {self.code}: {message[-1] if message else ''}"
            )
        return done.stdout.decode("utf-8", errors="surrogateescape")


@dataclass(frozen=True)
class Revision:
    """One side of a diff: `commit` is None for the working tree."""

    name: str  # as the user wrote it (HEAD~1, origin/main), or "working tree"
    commit: str | None

    @property
    def label(self) -> str:
        return WORKING_TREE if self.commit is None else f"{self.name} ({self.commit[:12]})"

    def to_json(self) -> dict[str, str | None]:
        return {"name": self.name, "commit": self.commit}


def run_git(folder: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            env=codetree.git_environment(),
            timeout=_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError as exc:
        raise EnvironmentProblem("reprobox diff needs git on PATH; install git") from exc
    except subprocess.TimeoutExpired as exc:
        raise EnvironmentProblem(f"git {' '.join(args)} took over {_TIMEOUT_S} s in {folder}") from exc


def open_repository(code: Path, job_file: Path) -> Repository:
    """The work tree of the job's code folder; refused (exit 2) when the code is not in one."""
    if shutil.which("git") is None:
        raise EnvironmentProblem("reprobox diff needs git on PATH; install git")
    done = run_git(code, "rev-parse", "--show-toplevel", "--show-prefix")
    lines = done.stdout.decode(errors="surrogateescape").splitlines()
    if done.returncode != 0 or not lines:
        raise UsageError(
            f"{job_file}: the job's code folder {code} is not in a git work tree, so there are no versions "
            "to diff; run `git init` and commit, or compare two runs with reprobox compare"
        )
    prefix = lines[1] if len(lines) > 1 else ""
    return Repository(code=code.resolve(), top=Path(lines[0]), prefix=prefix)


def resolve(repo: Repository, name: str | None) -> Revision:
    """A revision as the user named it, checked to be a commit; None is the working tree."""
    if name is None:
        return Revision(WORKING_TREE, None)
    if name.startswith("-"):
        raise UsageError(f"{name!r} is not a revision; name a commit, e.g. HEAD~1, origin/main or a tag")
    done = run_git(repo.code, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}")
    commit = done.stdout.decode().strip()
    if done.returncode != 0 or not commit:
        raise UsageError(
            f"{name!r} is not a commit in {repo.top}; name one git knows (git log --oneline), e.g. HEAD~1, "
            "origin/main (after git fetch), a tag or a commit hash"
        )
    return Revision(name, commit)


def snapshot(
    repo: Repository, revision: Revision, store: Path, *, exclude: tuple[Path, ...]
) -> codetree.CodeSnapshot:
    """The code folder as it is at `revision`, as a read-only snapshot in `store`."""
    if revision.commit is None:
        return codetree.snapshot_code(repo.code, store, exclude=exclude)
    tree = f"{revision.commit}:{repo.prefix}" if repo.prefix else revision.commit
    done = run_git(repo.code, "archive", "--format=tar", tree)
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise UsageError(
            f"the code folder {repo.prefix or '.'} does not exist at {revision.label} ({message}); "
            "diff revisions that hold the job's code"
        )
    if len(done.stdout) > ARCHIVE_LIMIT:
        raise UsageError(
            f"the code at {revision.label} is over {ARCHIVE_LIMIT >> 30} GiB; keep data out of git"
        )
    scratch = Path(tempfile.mkdtemp(prefix="reprobox-diff-"))
    try:
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
            archive.extractall(scratch, filter="data")
        made = codetree.snapshot_code(scratch, store)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    facts = codetree.GitFacts(commit=revision.commit, dirty=False, root=str(repo.top))
    return replace(made, source=repo.code, tree=replace(made.tree, git=facts, selection=codetree.MODE_GIT))
