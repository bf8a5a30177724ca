"""A wheelhouse for offline builds: every wheel of some locks, downloaded with its hash checked, then
checked to be there as the build will look for it (by name and version, offline).

pip downloads each lock with `--require-hashes --no-deps` for the image's interpreter: it refuses a file
whose sha256 the lock does not list, and a wheel already in the folder is checked rather than fetched
again. The final check is the build's own rule, so a wheelhouse this fills is one a build accepts.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from reprobox import image, progress
from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.locking._base import shown
from reprobox.locking._failures import download_failure
from reprobox.locking._pip import run_pip
from reprobox.locking._target import Target
from reprobox.offline import offline_path


@dataclass(frozen=True)
class Wheelhouse:
    """A filled wheelhouse: the locks it serves and their wheels in it."""

    path: Path
    locks: tuple[Path, ...]
    wheels: tuple[Path, ...]  # sorted by name: one file for each pin of the locks

    def to_json(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "locks": [str(lock) for lock in self.locks],
            "wheels": [{"name": wheel.name, "bytes": wheel.stat().st_size} for wheel in self.wheels],
            "bytes": sum(wheel.stat().st_size for wheel in self.wheels),
        }


def check_hashed(lock: Path) -> list[image.LockLine]:
    """The lock's requirements; each must be `name==version --hash=...`, as pip's hash mode needs."""
    try:
        lines = image.lock_lines(lock)
    except FileNotFoundError:
        raise UsageError(f"lock {lock} does not exist; pass the lock file to fetch the wheels of") from None
    except (OSError, UnicodeDecodeError):
        raise UsageError(f"lock {lock} cannot be read; pass a readable lock file") from None
    for line in lines:
        if line.version is None or not line.hashed:
            raise UsageError(
                f"{lock}:{line.line}: {line.name!r} is not pinned as `name==version --hash=sha256:...`, so "
                "its wheel cannot be fetched hash-checked; lock the file with `reprobox lock`"
            )
    return lines


def fill_wheelhouse(
    locks: Sequence[Path], wheelhouse: Path, target: Target, labels: Mapping[Path, str] | None = None
) -> Wheelhouse:
    """Download every wheel of `locks` into `wheelhouse` (hashes checked), then check it holds them all.
    `labels` names a lock in messages when its file is a scratch copy of one not written yet."""
    labels = labels or {}
    if wheelhouse.exists() and not wheelhouse.is_dir():
        raise UsageError(f"--wheelhouse {wheelhouse} is a file; pass a folder for the wheels")
    for lock in locks:
        check_hashed(lock)
    wheelhouse.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="reprobox-wheelhouse-") as folder:
        for lock in locks:
            if not image.lock_lines(lock):
                continue  # a job's lock may add nothing to the image's
            label = labels.get(lock) or shown(lock)
            progress.say(f"downloading the wheels of {label} into {wheelhouse} (hashes checked) ...")
            arguments = [
                "download",
                "--require-hashes",
                "--no-deps",
                *target.wheel_flags(),
                *target.index_flags(),
                "--dest",
                str(wheelhouse),
                "--requirement",
                str(lock),
            ]
            run = run_pip(arguments, Path(folder))
            if run.returncode != 0:
                raise download_failure(run, lock, target, label)
    return check_wheelhouse(locks, wheelhouse, labels)


def check_wheelhouse(
    locks: Sequence[Path], wheelhouse: Path, labels: Mapping[Path, str] | None = None
) -> Wheelhouse:
    """The wheels of `locks` in `wheelhouse`, found by name and version as a build finds them; a pin
    with no wheel there is named with its lock line."""
    present: dict[tuple[str, str], Path] = {}
    for path in sorted(wheelhouse.iterdir()) if wheelhouse.is_dir() else ():
        pin = image.wheel_pin(path.name)
        if pin is not None and path.is_file():
            present.setdefault(pin, path)
    wheels: dict[str, Path] = {}
    missing = []
    wanting: dict[str, None] = {}  # the locks a missing wheel is of, in order
    for lock in locks:
        label = (labels or {}).get(lock) or shown(lock)
        for line in check_hashed(lock):
            found = present.get((line.name, line.version or ""))
            if found is None:
                missing.append(f"{line} ({label}:{line.line})")
                wanting[label] = None
            else:
                wheels[found.name] = found
    if missing:
        more = ", ..." if len(missing) > 5 else ""
        raise EnvironmentProblem(
            f"wheelhouse {wheelhouse} has no wheel for {', '.join(missing[:5])}{more}; "
            f"{offline_path(wheelhouse, list(wanting), base=None)}"
        )
    return Wheelhouse(wheelhouse, tuple(locks), tuple(wheels[name] for name in sorted(wheels)))
