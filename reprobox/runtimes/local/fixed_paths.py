"""The stable layout made real, for kernels that refuse a private mount namespace.

One run of a job at a time holds the job's folder (an fcntl lock, so concurrent runs and other
reprobox processes take turns): the code is copied in (so the working directory and every imported
file's path is the fixed one), data is linked, HOME and TMPDIR start empty, and afterwards everything
the run wrote is moved into its real run directory before the controller reads it, whether the run
succeeded, failed or was interrupted. A run cut off before that (the controller killed outright) is
moved home by the next run of the job, which finds its run directory in the owner file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from reprobox.errors import EnvironmentProblem
from reprobox.guest import settings
from reprobox.records.manifest import MANIFEST_NAME
from reprobox.runtimes.base import RunPlan
from reprobox.runtimes.stable_paths import StableLayout

LOCK_FILE = ".lock"
OWNER_FILE = ".owner.json"  # the real run dir of the run holding the layout, for recovery
POLL_SECONDS = 0.1
LINKED_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules"})  # linked, not copied
SKIPPED_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
CONFLICT_SUFFIX = ".from-job"  # a file the job wrote where the controller already keeps one

ShouldStop = Callable[[], bool]


class StagingStopped(Exception):
    """The controller asked the run to stop while it waited for its turn."""


def ensure_root(layout: StableLayout, uid: int) -> None:
    """Create the per-user folder (private to its owner) and the job's folder inside it."""
    user_root = layout.root.parent
    with contextlib.suppress(FileExistsError):
        user_root.mkdir(mode=0o700, parents=True)
    info = user_root.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
        raise EnvironmentProblem(
            f"{user_root} is not a folder owned by uid {uid}; remove it so reprobox can create its own"
        )
    layout.root.mkdir(exist_ok=True)


@contextlib.contextmanager
def staged_run(layout: StableLayout, plan: RunPlan, should_stop: ShouldStop) -> Iterator[None]:
    """Hold the job's folder for one run: wait for the turn, stage the folders, move the results home."""
    if plan.reference_run is not None:
        _wait_for_reference(plan.reference_run, should_stop)
    with _locked(layout.root / LOCK_FILE, should_stop):
        salvage(layout)
        clear(layout)
        own_home = _outside(layout)
        if own_home and (layout.home.exists() or layout.home.is_symlink()):
            raise EnvironmentProblem(f"{layout.home} exists: a varied HOME must be a folder the run can own")
        (layout.root / OWNER_FILE).write_text(json.dumps({"run_dir": str(plan.run_dir)}), encoding="utf-8")
        try:
            stage(layout, plan)
            yield
        finally:
            move_into(layout.run, plan.run_dir)
            (layout.root / OWNER_FILE).unlink()
            clear(layout)
            if own_home:
                _make_writable(layout.home)
                shutil.rmtree(layout.home, ignore_errors=True)


def stage(layout: StableLayout, plan: RunPlan) -> None:
    """The folders a run starts with: a copy of the code, an empty run dir, HOME and TMPDIR; data linked."""
    skipped = {plan.run_dir.parent.parent.resolve(), layout.root.parent.resolve()}  # runs dir, our own folder
    copy_code(plan.job.code.resolve(), layout.code, skipped)
    layout.outputs.mkdir(parents=True)
    layout.home.mkdir(parents=_outside(layout))
    layout.tmp.mkdir()
    for mount in plan.job.data:
        target = layout.data[mount.target]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(mount.source.resolve())


def copy_code(source: Path, target: Path, linked: set[Path], top: Path | None = None) -> None:
    """Copy a code tree; links inside it stay relative, big or foreign folders are linked, caches skipped."""
    top = top or source
    target.mkdir(parents=True)
    for entry in sorted(os.scandir(source), key=lambda e: e.name):
        origin, copy = Path(entry.path), target / entry.name
        if entry.is_symlink():
            link = origin.readlink()
            pointed = Path(os.path.normpath(origin.parent / link))
            copy.symlink_to(link if pointed.is_relative_to(top) else pointed)
        elif entry.is_dir():
            if entry.name in SKIPPED_DIRS:
                continue
            if entry.name in LINKED_DIRS or origin.resolve() in linked:
                copy.symlink_to(origin, target_is_directory=True)
            else:
                copy_code(origin, copy, linked, top)
        elif entry.is_file():
            shutil.copy2(origin, copy)


def move_into(source: Path, target: Path) -> None:
    """Move everything under `source` into `target`, merging folders; a file never replaces another."""
    if not source.is_dir():
        return
    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.iterdir()):
        destination = target / entry.name
        if _real_dir(entry) and _real_dir(destination):
            move_into(entry, destination)
            entry.rmdir()
            continue
        if destination.exists() or destination.is_symlink():
            destination = _free_name(destination)
        shutil.move(str(entry), str(destination))


def salvage(layout: StableLayout) -> None:
    """Move a run's results home when its controller died before it could (the owner file names it)."""
    owner = layout.root / OWNER_FILE
    try:
        run_dir = Path(json.loads(owner.read_text(encoding="utf-8"))["run_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if run_dir.is_dir():
        move_into(layout.run, run_dir)
    owner.unlink()


def clear(layout: StableLayout) -> None:
    """Remove the run's folders (and a previous run's leftovers) from the job's folder."""
    home = () if _outside(layout) else (layout.home,)  # a HOME elsewhere is removed by its own run only
    for path in (layout.code, layout.run, *home, layout.tmp, layout.root / "mnt"):
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            _make_writable(path)
            shutil.rmtree(path, ignore_errors=True)
        if path.exists() or path.is_symlink():
            raise EnvironmentProblem(f"{path} could not be removed; remove it by hand and run again")


def _make_writable(tree: Path) -> None:
    """A job may leave read-only folders behind; its owner may always make them writable to remove them."""
    with contextlib.suppress(OSError):
        tree.chmod(0o700)
    for folder, dirs, _files in os.walk(tree):
        for name in dirs:  # before os.walk lists them; never through a link into the user's own files
            path = Path(folder, name)
            if not path.is_symlink():
                with contextlib.suppress(OSError):
                    path.chmod(0o700)


@contextlib.contextmanager
def _locked(path: Path, should_stop: ShouldStop) -> Iterator[None]:
    """Hold an exclusive fcntl lock on `path`, polling so that a stop request is noticed while waiting."""
    with path.open("a") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if should_stop():
                    raise StagingStopped from None
                time.sleep(POLL_SECONDS)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _wait_for_reference(reference_run: Path, should_stop: ShouldStop) -> None:
    """A run checked live against a reference starts after it: the reference's trail is home only then."""
    while not (
        (reference_run / MANIFEST_NAME).exists()
        or (reference_run / settings.GUEST_STATE / settings.GUEST_RESULT).exists()
    ):
        if should_stop():
            raise StagingStopped
        time.sleep(POLL_SECONDS)


def _outside(layout: StableLayout) -> bool:
    """Whether HOME was moved out of the layout's folder (by a variation)."""
    return not layout.home.is_relative_to(layout.root)


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _free_name(path: Path) -> Path:
    candidate = path.with_name(path.name + CONFLICT_SUFFIX)
    number = 1
    while candidate.exists() or candidate.is_symlink():
        number += 1
        candidate = path.with_name(f"{path.name}{CONFLICT_SUFFIX}{number}")
    return candidate
