"""The image's own lock that a job's lock goes on top of: named (cpu, cuda), a file, or the one a build
would pick, so that `reprobox lock` and `reprobox build` agree without being told twice."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reprobox import image
from reprobox.errors import EnvironmentProblem, UsageError

# The build's own choice among the image's locks (REPROBOX_LOCK, then the wheelhouse): one rule, kept there.
from reprobox.image._wheelhouse import resolve_lock


@dataclass(frozen=True)
class BaseLock:
    """The image's lock: its file, its name when it is one of the image's own, and what it pins."""

    path: Path
    name: str | None  # cpu or cuda when the lock is env/requirements-<name>.lock
    pins: Mapping[str, str]  # normalized name -> version

    @property
    def argument(self) -> str:
        """How `--base` names this lock (in the lock's regeneration command)."""
        return self.name or shown(self.path)

    def shown(self) -> str:
        """The lock's path as messages and the header show it: under the image's env/ when it is there."""
        if self.name is not None:
            return image.LOCKS[self.name]
        return shown(self.path)


def base_lock(base: str | None, environ: Mapping[str, str]) -> BaseLock:
    """The lock `--base` names (cpu, cuda or a file), else the one an image build would pick:
    REPROBOX_LOCK, then the first lock REPROBOX_WHEELHOUSE holds every wheel of, then cuda."""
    if base is not None and base not in image.LOCKS:
        return _from_file(Path(base).expanduser())
    project = image.project_files()
    if base is None:
        house = Path(environ.get(image.WHEELHOUSE_VARIABLE) or "").expanduser()
        houses = (house,) if environ.get(image.WHEELHOUSE_VARIABLE) and house.is_dir() else ()
        try:
            chosen = resolve_lock(environ.get(image.LOCK_VARIABLE) or None, project, houses)
        except EnvironmentProblem:
            raise UsageError(
                f"no --base given, and the wheelhouse {house} (${image.WHEELHOUSE_VARIABLE}) holds no image "
                "lock whole, so which lock a build takes is unknown; pass --base cpu or --base cuda"
            ) from None
        except UsageError as exc:
            raise UsageError(f"${image.LOCK_VARIABLE}: {exc.message}") from None
        base = next((name for name, lock in image.LOCKS.items() if lock == chosen), None)
        if base is None:
            return _from_file(project.root / chosen)
    path = project.root / image.LOCKS[base]
    return BaseLock(path, base, _pins(path))


def _from_file(path: Path) -> BaseLock:
    if not path.is_file():
        names = ", ".join(image.LOCKS)
        raise UsageError(
            f"--base {path} is neither one of the image's locks ({names}) nor a lock file; pass --base "
            "cpu, --base cuda or the path of the lock the image installs"
        )
    return BaseLock(path, None, _pins(path))


def _pins(path: Path) -> dict[str, str]:
    try:
        pins = image.locked_pins(path)
    except (OSError, UnicodeDecodeError):
        raise UsageError(
            f"--base {path} cannot be read as a lock file; pass cpu, cuda or a readable lock"
        ) from None
    if not pins:
        raise UsageError(
            f"--base {path} pins no package (no `name==version` line); pass cpu, cuda or the lock the "
            "image installs"
        )
    return pins


def shown(path: Path) -> str:
    """A path relative to the current directory when under it, else as it is."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)
