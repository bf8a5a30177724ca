"""The reprobox image as data: which files, build args and labels make it, and the tag that names it.

Pure functions, no engine. The build context is a tar made in memory with sorted names, zero owners,
a fixed mtime and normalized modes, so the same sources always give the same bytes. The image tag is a
hash of that context and the build args: an unchanged job finds its image by name and never builds.

Wheels from a wheelhouse join the context for the build, but enter the tag by name and size only:
their content is pinned by the lock's hashes, which pip checks, and hashing hundreds of MB of wheels
would make every "is it built already?" check slow.

A job's own wheelhouse (`image.wheelhouse`) adds to the shared one (`--wheelhouse` /
REPROBOX_WHEELHOUSE): the wheels of both join one wheelhouse/ in the context, which pip reads with
`--no-index`. Every wheel the locks pin is looked for before any build, and one that neither wheelhouse
has is named with the lock line that wants it, so pip never gets to fail on it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from reprobox._version import __version__
from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.guest.filehash import file_sha256
from reprobox.jobfile import ImageSpec

IMAGE_REPOSITORY = "reprobox/env"
LABEL_PREFIX = "io.reprobox."
MANAGED_LABEL = f"{LABEL_PREFIX}managed"
TAG_HEX_LENGTH = 16

BASE_IMAGE_VARIABLE = "REPROBOX_BASE_IMAGE"
WHEELHOUSE_VARIABLE = "REPROBOX_WHEELHOUSE"
LOCK_VARIABLE = "REPROBOX_LOCK"

LOCKS = {"cuda": "env/requirements-cuda.lock", "cpu": "env/requirements-cpu.lock"}
DEFAULT_LOCK = "cuda"
DETERMINISTIC_ENV_FILE = "env/deterministic.env"

CONTEXT_MTIME = 946684800  # 2000-01-01T00:00:00Z, for every member of the build context
CONTEXT_WHEELHOUSE = "wheelhouse"
CONTEXT_EXTRA_REQUIREMENTS = "extra/requirements.lock"
SKIPPED_NAMES = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".DS_Store"})
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".swp")

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*===?\s*([^\s;\\]+)")
_HASH_OPTION = re.compile(r"--hash[=\s]")
_ARG_BASE_IMAGE = re.compile(r"^ARG\s+BASE_IMAGE=(\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class ProjectFiles:
    """Where the Dockerfile, env/ and the package source live (a source checkout of reprobox)."""

    root: Path

    @property
    def dockerfile(self) -> Path:
        return self.root / "Dockerfile"

    @property
    def env_dir(self) -> Path:
        return self.root / "env"

    @property
    def package_dir(self) -> Path:
        return self.root / "reprobox"

    @property
    def pyproject(self) -> Path:
        return self.root / "pyproject.toml"


@dataclass(frozen=True)
class ContextFile:
    """One member of the build context: its name in the tar and the host file it comes from."""

    name: str
    source: Path


@dataclass(frozen=True)
class BuildPlan:
    """Everything needed to build (or find) the image of a job, computed without an engine."""

    tag: str
    build_digest: str  # sha256 over the context digest, the wheels' names and sizes, and the build args
    context_digest: str  # sha256 of the context tar without the wheels
    base_image: str
    lock: str  # path of the lock inside the context
    buildargs: Mapping[str, str]
    labels: Mapping[str, str]
    files: tuple[ContextFile, ...]
    wheels: tuple[ContextFile, ...] = ()
    wheelhouse: Path | None = None  # the first of `wheelhouses` (the job's own when it has one)
    context: bytes = field(default=b"", repr=False)  # the context tar without the wheels
    wheelhouses: tuple[Path, ...] = ()  # every wheelhouse the wheels come from: the job's, then the shared
    extra_requirements: Path | None = None  # the job's own lock on the host (image.requirements)

    @property
    def offline(self) -> bool:
        """True when pip installs from the wheelhouse alone."""
        return bool(self.wheelhouses)


@dataclass(frozen=True)
class LockLine:
    """One requirement of a lock: where it is, and whether it is pinned the way --require-hashes needs."""

    path: Path
    line: int
    name: str  # normalized; the raw text when the line is not `name==version`
    version: str | None  # None when the line is not `name==version`
    hashed: bool

    def __str__(self) -> str:
        return f"{self.name}=={self.version}" if self.version is not None else self.name


def project_files(root: Path | None = None) -> ProjectFiles:
    """The source checkout the image is built from: the directory above the reprobox package."""
    # This module's own path, not reprobox.__file__: an editable install can present the package
    # as a namespace package without __file__.
    project = ProjectFiles(root or Path(__file__).resolve().parent.parent)
    missing = [p for p in (project.dockerfile, project.env_dir, project.pyproject) if not p.exists()]
    if missing:
        raise EnvironmentProblem(
            f"reprobox is installed without its image files ({', '.join(p.name for p in missing)} missing in "
            f"{project.root}); install it from a source checkout with `pip install -e PATH_TO_REPROBOX` "
            "to build images, or use a prebuilt image with `image: REFERENCE` in the job file"
        )
    return project


def deterministic_env(project: ProjectFiles | None = None) -> dict[str, str]:
    """The variables of env/deterministic.env, in file order (the image bakes them in as ENV)."""
    path = (project or project_files()).root / DETERMINISTIC_ENV_FILE
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        key, sep, value = text.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise EnvironmentProblem(f"{path}:{number}: expected KEY=VALUE, found {text!r}; fix the line")
        values[key] = value
    return values


def default_base_image(project: ProjectFiles | None = None) -> str:
    """The pinned base the Dockerfile names in `ARG BASE_IMAGE=...`."""
    project = project or project_files()
    match = _ARG_BASE_IMAGE.search(project.dockerfile.read_text(encoding="utf-8"))
    if match is None:
        raise EnvironmentProblem(f"{project.dockerfile} has no `ARG BASE_IMAGE=...` line; restore it")
    return match.group(1)


def locked_pins(lock_file: Path) -> dict[str, str]:
    """{normalized name: version} of every `name==version` line of a requirements lock."""
    pins: dict[str, str] = {}
    for line in lock_file.read_text(encoding="utf-8").splitlines():
        match = _REQUIREMENT.match(line)
        if match:
            pins[normalize_name(match.group(1))] = match.group(2)
    return pins


def normalize_name(name: str) -> str:
    """PEP 503 normalization, so `PyYAML`, `pyyaml` and wheel file names compare equal."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_pin(filename: str) -> tuple[str, str] | None:
    """(normalized name, version) of a wheel file name, or None if it is not one."""
    if not filename.endswith(".whl"):
        return None
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        return None
    return normalize_name(parts[0]), parts[1]


def plan_build(
    image: ImageSpec | None = None,
    *,
    base_image: str | None = None,
    lock: str | None = None,
    wheelhouse: Path | None = None,
    environ: Mapping[str, str] | None = None,
    project: ProjectFiles | None = None,
) -> BuildPlan:
    """The build of the reprobox image for a job's `image:` settings (a prebuilt `reference` is not built).

    Precedence: the arguments (CLI flags), then the job file, then REPROBOX_BASE_IMAGE /
    REPROBOX_WHEELHOUSE / REPROBOX_LOCK, then the Dockerfile's pinned base. Without an explicit lock,
    a wheelhouse picks the first lock (cuda, then cpu) whose every wheel it holds.
    """
    image = image or ImageSpec()
    environ = os.environ if environ is None else environ
    project = project or project_files()
    base = base_image or image.base or environ.get(BASE_IMAGE_VARIABLE) or default_base_image(project)
    houses = wheelhouses(image, wheelhouse or _path_or_none(environ.get(WHEELHOUSE_VARIABLE)))
    lock_name = resolve_lock(lock or environ.get(LOCK_VARIABLE), project, houses)
    if image.requirements is not None:
        check_extra_lock(image.requirements, project.root / lock_name)

    files = list(_project_members(project))
    if image.requirements is not None:
        files.append(ContextFile(CONTEXT_EXTRA_REQUIREMENTS, image.requirements))
    files.sort(key=lambda member: member.name)
    wheels = _wheel_members(project, lock_name, houses, image.requirements) if houses else ()

    context = context_tar(files)
    context_digest = hashlib.sha256(context).hexdigest()
    buildargs = {
        "BASE_IMAGE": base,
        "LOCK": lock_name,
        "WHEELHOUSE": CONTEXT_WHEELHOUSE if houses else "",
        "EXTRA_REQUIREMENTS": CONTEXT_EXTRA_REQUIREMENTS if image.requirements is not None else "",
    }
    identity = {
        "context": context_digest,
        "wheels": [[w.name, w.source.stat().st_size] for w in wheels],
        "buildargs": buildargs,
    }
    build_digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    labels = {
        MANAGED_LABEL: "true",
        f"{LABEL_PREFIX}version": __version__,
        f"{LABEL_PREFIX}base": base,
        f"{LABEL_PREFIX}lock": lock_name,
        f"{LABEL_PREFIX}lock-digest": "sha256:" + file_sha256(project.root / lock_name),
        f"{LABEL_PREFIX}context-digest": "sha256:" + context_digest,
        f"{LABEL_PREFIX}build-digest": "sha256:" + build_digest,
        f"{LABEL_PREFIX}offline": "true" if houses else "false",
    }
    if image.requirements is not None:
        labels[f"{LABEL_PREFIX}extra-requirements-digest"] = "sha256:" + file_sha256(image.requirements)
    return BuildPlan(
        tag=f"{IMAGE_REPOSITORY}:{build_digest[:TAG_HEX_LENGTH]}",
        build_digest=build_digest,
        context_digest=context_digest,
        base_image=base,
        lock=lock_name,
        buildargs=buildargs,
        labels=labels,
        files=tuple(files),
        wheels=wheels,
        wheelhouse=houses[0] if houses else None,
        context=context,
        wheelhouses=houses,
        extra_requirements=image.requirements,
    )


def wheelhouses(image: ImageSpec, shared: Path | None) -> tuple[Path, ...]:
    """The wheelhouses a build installs from: the job's own first, then the shared one; each must exist."""
    houses: list[Path] = []
    for house in (image.wheelhouse, shared):
        if house is None:
            continue
        if not house.is_dir():
            raise UsageError(
                f"wheelhouse {house} is not a directory; fill it with scripts/fill-wheelhouse.sh"
            )
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
        f"(for the CPU lock: {_some(missing)}); "
        f"fill it with scripts/fill-wheelhouse.sh --dest {wheelhouses[-1]}"
    )


def lock_lines(lock_file: Path) -> list[LockLine]:
    """Every requirement of a lock with its line number (a requirement may continue over `\\` lines)."""
    found: list[LockLine] = []
    continued = False
    for number, raw in enumerate(lock_file.read_text(encoding="utf-8").splitlines(), start=1):
        text = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if continued and found:
            found[-1] = _with_hash(found[-1], text)
        elif text and not text.startswith("-"):
            match = _REQUIREMENT.match(text)
            requirement = text.split(" --", 1)[0].rstrip("\\ ")
            name, version = (normalize_name(match.group(1)), match.group(2)) if match else (requirement, None)
            found.append(_with_hash(LockLine(lock_file, number, name, version, hashed=False), text))
        continued = raw.rstrip().endswith("\\")
    return found


def check_extra_lock(extra: Path, base_lock: Path) -> list[LockLine]:
    """The job's lock as pip's --require-hashes needs it: each line `name==version --hash=...`, and no
    package pinned by the image's own lock at another version. Returns its requirements."""
    lines = lock_lines(extra)
    base = {line.name: line for line in lock_lines(base_lock)}
    for line in lines:
        if line.version is None or not line.hashed:
            raise UsageError(
                f"{extra}:{line.line}: {line.name!r} must be pinned as `name==version --hash=sha256:...` "
                "for a hash-checked install; lock the file with scripts/lock_requirements.py"
            )
        clash = base.get(line.name)
        if clash is not None and clash.version != line.version:
            raise UsageError(
                f"{extra}:{line.line}: {line} conflicts with {clash} in "
                f"{base_lock.parent.name}/{base_lock.name}:{clash.line}, which the image installs; "
                f"pin {clash} or drop the line "
                "(scripts/lock_requirements.py resolves against the image's lock)"
            )
    return lines


def context_tar(files: Iterable[ContextFile], wheels: Iterable[ContextFile] = ()) -> bytes:
    """The build context as tar bytes (see write_context)."""
    buffer = io.BytesIO()
    write_context(files, buffer, wheels)
    return buffer.getvalue()


def write_context(files: Iterable[ContextFile], out: IO[bytes], wheels: Iterable[ContextFile] = ()) -> None:
    """Write a deterministic tar: sorted names, owner 0 with empty names, fixed mtime, modes 644/755."""
    members = sorted(
        [*files, *(ContextFile(f"{CONTEXT_WHEELHOUSE}/{w.source.name}", w.source) for w in wheels)],
        key=lambda member: member.name,
    )
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for member in members:
            stat = member.source.stat()
            info = tarfile.TarInfo(member.name)
            info.size = stat.st_size
            info.mtime = CONTEXT_MTIME
            info.mode = 0o755 if stat.st_mode & 0o111 else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with member.source.open("rb") as handle:
                archive.addfile(info, handle)


def write_build_context(plan: BuildPlan, out: IO[bytes]) -> None:
    """The full context for the engine: the plan's files plus its wheels under wheelhouse/."""
    write_context(plan.files, out, plan.wheels)


def render_build_plan(plan: BuildPlan) -> dict[str, Any]:
    """The plan as JSON-ready data, for `--dry-run`: what would be built, from what, and under which name."""
    return {
        "tag": plan.tag,
        "build_digest": "sha256:" + plan.build_digest,
        "context_digest": "sha256:" + plan.context_digest,
        "base_image": plan.base_image,
        "lock": plan.lock,
        "offline": plan.offline,
        "wheelhouse": str(plan.wheelhouse) if plan.wheelhouse is not None else None,
        "wheelhouses": [str(house) for house in plan.wheelhouses],
        "buildargs": dict(plan.buildargs),
        "labels": dict(plan.labels),
        "files": [
            {"name": f.name, "source": str(f.source), "bytes": f.source.stat().st_size} for f in plan.files
        ],
        "wheels": [{"name": w.source.name, "bytes": w.source.stat().st_size} for w in plan.wheels],
    }


def _project_members(project: ProjectFiles) -> Iterable[ContextFile]:
    yield ContextFile("Dockerfile", project.dockerfile)
    yield ContextFile("pyproject.toml", project.pyproject)
    for directory in (project.env_dir, project.package_dir):
        for path in sorted(_tree_files(directory)):
            yield ContextFile(path.relative_to(project.root).as_posix(), path)


def _tree_files(directory: Path) -> Iterable[Path]:
    """Regular files under `directory`, without caches, bytecode or editor leftovers."""
    for current, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if not _skipped(d)]
        for filename in filenames:
            path = Path(current) / filename
            if not _skipped(filename) and path.is_file():
                yield path


def _skipped(name: str) -> bool:
    return name in SKIPPED_NAMES or name.endswith(SKIPPED_SUFFIXES) or name.startswith(".#")


def _wheel_members(
    project: ProjectFiles, lock: str, wheelhouses: Sequence[Path], extra: Path | None
) -> tuple[ContextFile, ...]:
    """The wheels the locks pin, from every wheelhouse; fails early, naming them, when one is missing.

    A wheel file found in several wheelhouses is taken once, from the first (pip checks its hash).
    """
    present = _wheelhouse_pins(wheelhouses)
    locks = [lock_lines(project.root / lock)] + ([lock_lines(extra)] if extra is not None else [])
    for lines in locks:
        missing = _missing_wheels(lines, present)
        if missing:
            raise EnvironmentProblem(missing_wheels_message(missing, wheelhouses, project.root))
    wanted = {(line.name, line.version) for lines in locks for line in lines}
    chosen: dict[str, ContextFile] = {}
    for pin, paths in present.items():
        if pin in wanted:
            for path in paths:
                chosen.setdefault(path.name, ContextFile(path.name, path))
    return tuple(sorted(chosen.values(), key=lambda member: member.name))


def missing_wheels_message(missing: Sequence[LockLine], wheelhouses: Sequence[Path], root: Path) -> str:
    """One sentence: which pins no wheelhouse holds, the lock lines that want them, and how to fetch them."""
    lock = missing[0].path
    shown = _display_path(lock, root)
    script = _display_path(root / "scripts" / "fill-wheelhouse.sh", root, under_root=False)
    dest = wheelhouses[0]
    wanted = _some([f"{line} ({_display_path(line.path, root)}:{line.line})" for line in missing])
    return (
        f"{_houses(wheelhouses, 'has no', 'has a')} wheel for {wanted}; fetch them with "
        f"`{script} --lock {shown} --dest {dest}` (or `pip download --only-binary=:all: "
        f"--no-deps -d {dest} -r {shown}` on CPython 3.11, Linux x86_64)"
    )


def _with_hash(line: LockLine, text: str) -> LockLine:
    if line.hashed or not _HASH_OPTION.search(text):
        return line
    return LockLine(line.path, line.line, line.name, line.version, hashed=True)


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


def _path_or_none(text: str | None) -> Path | None:
    return Path(text).expanduser() if text else None
