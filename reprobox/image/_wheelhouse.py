"""Offline builds: the wheelhouses a build installs from, the lock they can serve, and the wheels they
lack, named with the lock line that wants each before pip ever runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.image._context import ContextFile
from reprobox.image._lock import LockLine, lock_lines, normalize_name
from reprobox.image._project import ProjectFiles
from reprobox.jobfile import ImageSpec
from reprobox.offline import offline_path

LOCKS = {"cuda": "env/requirements-cuda.lock", "cpu": "env/requirements-cpu.lock"}
DEFAULT_LOCK = "cuda"


def wheel_pin(filename: str) -> tuple[str, str] | None:
    """(normalized name, version) of a wheel file name, or None if it is not one."""
    if not filename.endswith(".whl"):
        return None
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        return None
    return normalize_name(parts[0]), parts[1]


def wheelhouses(image: ImageSpec, shared: Path | None) -> tuple[Path, ...]:
    """The wheelhouses a build installs from: the job's own first, then the shared one; each must exist."""
    houses: list[Path] = []
    for house in (image.wheelhouse, shared):
        if house is None:
            continue
        if not house.is_dir():
            raise UsageError(f"wheelhouse {house} is not a directory; {offline_path(house)}")
        if all(house.resolve() != known.resolve() for known in houses):
            houses.append(house)
    return tuple(houses)


def resolve_lock(lock: str | None, project: ProjectFiles, wheelhouses: Sequence[Path] = ()) -> str:
    """The lock's path inside the context, from a name (cuda, cpu), a path under env/, or the wheelhouses.

    Without a name, the wheelhouses pick the first lock (cuda, then cpu) whose every wheel they hold;
    the job's extra lock plays no part in that choice (its wheels are checked on their own).
    """
    if lock:
        name = LOCKS.get(lock, lock)
        path = (project.root / name).resolve()
        if not path.is_file() or project.env_dir.resolve() not in path.parents:
            raise UsageError(
                f"lock {lock!r} is not a file under {project.env_dir}; use one of {', '.join(LOCKS)} "
                f"or a path such as {LOCKS[DEFAULT_LOCK]}"
            )
        return path.relative_to(project.root.resolve()).as_posix()
    if not wheelhouses:
        return LOCKS[DEFAULT_LOCK]
    present = _wheelhouse_pins(wheelhouses)
    for candidate in LOCKS.values():
        if not _missing_wheels(lock_lines(project.root / candidate), present):
            return candidate
    missing = [str(line) for line in _missing_wheels(lock_lines(project.root / LOCKS["cpu"]), present)]
    raise EnvironmentProblem(
        f"{_houses(wheelhouses, 'lacks', 'together lack')} wheels for every lock "
        f"(for the CPU lock: {_some(missing)}); {offline_path(wheelhouses[-1])}"
    )


def wheel_members(locks: Sequence[Path], wheelhouses: Sequence[Path], root: Path) -> tuple[ContextFile, ...]:
    """The wheels the locks pin, from every wheelhouse; fails early, naming them, when one is missing.

    A wheel file found in several wheelhouses is taken once, from the first (pip checks its hash).
    """
    present = _wheelhouse_pins(wheelhouses)
    lines = [lock_lines(lock) for lock in locks]
    for lock in lines:
        missing = _missing_wheels(lock, present)
        if missing:
            raise EnvironmentProblem(missing_wheels_message(missing, wheelhouses, root))
    wanted = {(line.name, line.version) for lock in lines for line in lock}
    chosen: dict[str, ContextFile] = {}
    for pin, paths in present.items():
        if pin in wanted:
            for path in paths:
                chosen.setdefault(path.name, ContextFile(path.name, path))
    return tuple(sorted(chosen.values(), key=lambda member: member.name))


def missing_wheels_message(missing: Sequence[LockLine], wheelhouses: Sequence[Path], root: Path) -> str:
    """One sentence: which pins no wheelhouse holds, the lock lines that want them, and how to fetch them."""
    lock = missing[0].path
    dest = wheelhouses[0]
    wanted = _some([f"{line} ({_display_path(line.path, root)}:{line.line})" for line in missing])
    # the image's own lock is fetched by its name (cpu, cuda), a job's by its path
    image_lock = next(
        (name for name, path in LOCKS.items() if lock.resolve() == (root / path).resolve()), None
    )
    locked = [] if image_lock else [_display_path(lock, root, under_root=False)]
    fix = offline_path(dest, locked, base=image_lock)
    return f"{_houses(wheelhouses, 'has no', 'has a')} wheel for {wanted}; {fix}"


def _wheelhouse_pins(wheelhouses: Sequence[Path]) -> dict[tuple[str, str], list[Path]]:
    found: dict[tuple[str, str], list[Path]] = {}
    for wheelhouse in wheelhouses:
        for path in sorted(wheelhouse.iterdir()):
            pin = wheel_pin(path.name)
            if pin is not None and path.is_file():
                found.setdefault(pin, []).append(path)
    return found


def _missing_wheels(
    lines: Sequence[LockLine], present: Mapping[tuple[str, str], list[Path]]
) -> list[LockLine]:
    return [line for line in lines if line.version is not None and (line.name, line.version) not in present]


def _houses(wheelhouses: Sequence[Path], one: str, several: str) -> str:
    """`wheelhouse A has no` for one wheelhouse, `neither wheelhouse A nor B has a` for several."""
    if len(wheelhouses) == 1:
        return f"wheelhouse {wheelhouses[0]} {one}"
    if several.startswith("together"):
        return "wheelhouses " + " and ".join(str(house) for house in wheelhouses) + f" {several}"
    return "neither wheelhouse " + " nor ".join(str(house) for house in wheelhouses) + f" {several}"


def _display_path(path: Path, root: Path, *, under_root: bool = True) -> str:
    """`path` relative to the current directory (or the project, if `under_root`) when under one."""
    for base in (Path.cwd(), root) if under_root else (Path.cwd(),):
        try:
            return path.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            continue
    return str(path.resolve()) if not under_root else str(path)


def _some(names: list[str], shown: int = 5) -> str:
    return ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")
