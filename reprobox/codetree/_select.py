"""Which files are "the code": what git would commit, or else the folder minus `.reproboxignore`.

In both modes some files are never code: version control folders, bytecode and tool caches, virtual
environments, reprobox's runs and attestations, and the files this very process writes its stdout or
stderr to (`reprobox verify job.yaml > verify.log` inside the code folder must not change the code).
A `.reproboxignore` (gitignore syntax) in the code folder is honoured in both modes.

A FIFO, socket or device node, or a symlink loop, that would be part of the code is refused with a
UsageError naming it: it is never opened (a FIFO would block the read forever) nor silently left out.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox.codetree._git import git_view
from reprobox.codetree._tree import GitFacts
from reprobox.errors import UsageError
from reprobox.saferead import kind_of

if TYPE_CHECKING:
    import pathspec

IGNORE_FILE = ".reproboxignore"
ATTESTATION_NAME = "reprobox.attestation.json"  # and <job>.reprobox.attestation.json
MODEL_SIGNATURE_NAME = "reprobox.model.sig"  # the model's signature beside it, and <job>.reprobox.model.sig
IGNORED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
        ".venv",
        "venv",
        "runs",
    }
)
IGNORED_SUFFIXES = (".pyc", ".pyo")
MODE_GIT = "git"
MODE_IGNORE_FILE = "reproboxignore"


def is_reprobox_artefact(name: str) -> bool:
    """An attestation (or the model's signature beside it) reprobox writes next to a job file: never part
    of the code."""
    return any(name == kind or name.endswith("." + kind) for kind in (ATTESTATION_NAME, MODEL_SIGNATURE_NAME))


@dataclass(frozen=True)
class Selection:
    """The code's files (regular files and symlinks, relative posix paths, sorted) and how chosen."""

    root: Path
    files: tuple[str, ...]
    mode: str
    git: GitFacts | None = None


def select_files(root: Path, *, exclude: tuple[Path, ...] = ()) -> Selection:
    """The files that make up the code in `root`; `exclude` names folders to leave out (the runs dir)."""
    return _select(root, exclude, frozenset())


def _select(root: Path, exclude: tuple[Path, ...], above: frozenset[Path]) -> Selection:
    """`select_files`, knowing the folders it is already selecting in (`above`), so that no folder is
    ever entered twice, whatever git lists."""
    rules = _Rules(root, exclude)
    view = git_view(root)
    if view is None:
        return Selection(root, tuple(sorted(_walk(root, rules))), MODE_IGNORE_FILE)
    above = above | {root.resolve()}
    files: list[str] = []
    for relative in view.paths:
        prefix = relative.rstrip("/")
        path = root / prefix
        if prefix in ("", ".") or path.resolve() in above:
            continue  # the folder itself, as git lists an uninitialised submodule from inside it
        if path.is_dir() and not path.is_symlink():
            if rules.keeps(prefix, is_dir=True):
                files += [
                    f"{prefix}/{p}" for p in _nested(path, exclude, above) if rules.keeps(f"{prefix}/{p}")
                ]
        elif rules.keeps(relative) and rules.keeps_entry(path, refuse_special=True):
            files.append(relative)
    # Dirty means a change in the code itself: not an attestation just written, nor this process's log.
    dirty = any(_counts(rules, root, changed) for changed in view.changed)
    facts = GitFacts(commit=view.commit, dirty=dirty, root=view.root)
    return Selection(root, tuple(sorted(set(files))), MODE_GIT, facts)


def _nested(path: Path, exclude: tuple[Path, ...], above: frozenset[Path]) -> tuple[str, ...]:
    """The files of a submodule, nested repository or worktree inside the code: its own git decides
    them. A submodule never initialised (a clone made without --recursive) has no git of its own and
    holds nothing of the code; whatever lies in it is taken as a plain folder."""
    if (path / ".git").exists():
        return _select(path, exclude, above).files
    return tuple(sorted(_walk(path, _Rules(path, exclude))))


def _counts(rules: _Rules, root: Path, changed: str) -> bool:
    if not rules.keeps(changed.rstrip("/"), is_dir=changed.endswith("/")):
        return False
    path = root / changed
    return not path.exists() or path.is_dir() or rules.keeps_entry(path)  # a deletion counts too


class _Rules:
    """The built-in exclusions, the excluded folders and `.reproboxignore`, for paths relative to root."""

    def __init__(self, root: Path, exclude: tuple[Path, ...]) -> None:
        self.spec = _ignore_spec(root)
        base = root.resolve()
        self.excluded = tuple(
            e.resolve().relative_to(base).as_posix()
            for e in exclude
            if e.resolve() != base and e.resolve().is_relative_to(base)
        )
        self.own_outputs = _own_output_files()

    def keeps(self, relative: str, *, is_dir: bool = False) -> bool:
        parts = relative.split("/")
        folders = parts if is_dir else parts[:-1]
        if any(part in IGNORED_DIRS for part in folders):
            return False
        if not is_dir and (relative.endswith(IGNORED_SUFFIXES) or is_reprobox_artefact(parts[-1])):
            return False
        if any(relative == e or relative.startswith(e + "/") for e in self.excluded):
            return False
        return self.spec is None or not self.spec.match_file(relative + ("/" if is_dir else ""))

    def keeps_entry(self, path: Path, *, refuse_special: bool = False) -> bool:
        """Regular files and symlinks only, and never the file this process's output goes to.

        With `refuse_special`, any other kind of file, or a symlink loop, raises a UsageError.
        """
        try:
            info = path.lstat()
        except OSError:  # a tracked file deleted from disk, or one removed while listing
            return False
        if (info.st_dev, info.st_ino) in self.own_outputs:
            return False
        if stat.S_ISLNK(info.st_mode):
            if refuse_special:
                _refuse_loop(path)
            return True
        if refuse_special and not stat.S_ISREG(info.st_mode):
            raise UsageError(
                f"{path} is {kind_of(info.st_mode)}, which cannot be part of the code; remove it, or list "
                f"it in {IGNORE_FILE} (or .gitignore) if it is not code"
            )
        return stat.S_ISREG(info.st_mode)


def _refuse_loop(path: Path) -> None:
    """A symlink that can never be resolved (it leads back to itself) is refused, not recorded."""
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(
                f"{path} is a symlink loop (it leads back to itself); remove it, or list it in "
                f"{IGNORE_FILE} (or .gitignore) if it is not code"
            ) from None


def _walk(root: Path, rules: _Rules) -> list[str]:
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        current = Path(dirpath)
        base = current.relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        kept_dirs = []
        for name in sorted(dirnames):
            relative = prefix + name
            if (current / name).is_symlink():  # recorded as a link, like git does; never followed
                if rules.keeps(relative) and rules.keeps_entry(current / name, refuse_special=True):
                    files.append(relative)
            elif rules.keeps(relative, is_dir=True):
                kept_dirs.append(name)
        dirnames[:] = kept_dirs
        files += [
            prefix + name
            for name in filenames
            if rules.keeps(prefix + name) and rules.keeps_entry(current / name, refuse_special=True)
        ]
    return files


def _ignore_spec(root: Path) -> pathspec.GitIgnoreSpec | None:
    path = root / IGNORE_FILE
    if not path.is_file():
        return None
    import pathspec  # the controller's dependency only: the guest never selects code

    return pathspec.GitIgnoreSpec.from_lines(path.read_text(encoding="utf-8").splitlines())


def _own_output_files() -> frozenset[tuple[int, int]]:
    """(device, inode) of the regular files this process's stdout and stderr are redirected to."""
    found = set()
    for fd in (1, 2):
        try:
            info = os.fstat(fd)
        except OSError:
            continue
        if not stat.S_ISCHR(info.st_mode):  # a file or a FIFO in the code folder; not the terminal
            found.add((info.st_dev, info.st_ino))
    return frozenset(found)
