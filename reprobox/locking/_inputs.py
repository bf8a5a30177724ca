"""What a job asks for: the requirements `reprobox lock` reads, from a requirements file or a pyproject.

A requirements.in / requirements.txt gives names, versions, extras and markers, one a line, with `-r`
(and `-c`) includes; a pyproject.toml gives its `[project] dependencies`. Each requirement keeps where
it came from (file:line), so pip's complaints can be told against the user's own file. What cannot
become `name==version --hash=...` (an editable install, a VCS checkout, a URL or a local path) is
refused here, before pip runs, with the fix.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobox.errors import EnvironmentProblem, UsageError

_COMMENT = re.compile(r"(^|\s+)#.*$")
_INCLUDE = re.compile(
    r"^(?P<flag>-r|-c|--requirement|--constraint)(?:\s*=\s*|\s+|(?<=^-r)|(?<=^-c))(?P<path>\S.*)$"
)
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?=\s*(?:$|[\[(<>=!~;@\s]))")
_VCS = re.compile(r"(^|@\s*)(git|hg|svn|bzr)\+", re.IGNORECASE)
_ARCHIVE = (".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")
_HASH_OPTION = re.compile(r"^--hash(?:=|\s+)\S+$")
_OPTION_START = re.compile(r"\s+(?=--?[A-Za-z])")
_FIX = (
    "name the package with a version (e.g. mypkg==1.2) and pass a folder holding its wheel with "
    "--find-links DIR"
)


@dataclass(frozen=True)
class Requirement:
    """One requirement as pip reads it, and where the user wrote it."""

    text: str  # NAME[extras] SPECIFIERS ; MARKERS, without options such as --hash
    origin: str  # `path:line`, or `path: [project] dependencies`


@dataclass(frozen=True)
class RequirementSet:
    """Everything one REQUIREMENTS argument asks for: its requirements and the constraints it adds."""

    source: Path
    requirements: tuple[Requirement, ...]
    constraints: tuple[Requirement, ...] = ()


def read_requirements(path: Path) -> RequirementSet:
    """The requirements of a requirements file (with its includes) or of a pyproject.toml."""
    text = _read(path, "REQUIREMENTS", "pass a requirements.in, requirements.txt or pyproject.toml")
    if path.suffix == ".toml":
        return RequirementSet(path, _pyproject_requirements(path, text))
    requirements: list[Requirement] = []
    constraints: list[Requirement] = []
    _read_lines(path, text, requirements, constraints, chain=(path.resolve(),), constraint=False)
    if not requirements:
        raise UsageError(
            f"{path} lists no requirements, so there is nothing to lock; add the packages the job needs "
            "beyond the image, one a line (e.g. transformers>=4.40)"
        )
    return RequirementSet(path, tuple(requirements), tuple(constraints))


def _read(path: Path, what: str, fix: str) -> str:
    if not path.exists():
        raise UsageError(f"{what} {path} does not exist; {fix}")
    if path.is_dir():
        raise UsageError(f"{what} {path} is a directory; {fix}")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "it is not UTF-8 text"
        raise UsageError(f"{what} {path} cannot be read ({reason}); {fix}") from None


def _read_lines(
    path: Path,
    text: str,
    requirements: list[Requirement],
    constraints: list[Requirement],
    *,
    chain: tuple[Path, ...],
    constraint: bool,
) -> None:
    """Add a requirements file's lines to `requirements` (or all to `constraints`), following includes."""
    for number, line in _logical_lines(text):
        where = f"{path}:{number}"
        include = _INCLUDE.match(line)
        if include:
            target = path.parent / include.group("path").strip()
            as_constraint = constraint or include.group("flag") in ("-c", "--constraint")
            if target.resolve() in chain:
                raise UsageError(f"{where}: {line} includes a file that includes it; remove the cycle")
            fix = f"fix the path in {where} (it is relative to {path.parent})"
            included = _read(target, f"{where}: included file", fix)
            _read_lines(
                target,
                included,
                requirements,
                constraints,
                chain=(*chain, target.resolve()),
                constraint=as_constraint,
            )
            continue
        requirement = Requirement(_requirement_text(line, where), where)
        (constraints if constraint else requirements).append(requirement)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each requirement: comments dropped, `\\` continuations joined."""
    found: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _COMMENT.sub("", raw).rstrip()
        continued = line.endswith("\\")
        line = line[:-1] if continued else line
        if pending is not None:
            pending = (pending[0], f"{pending[1]} {line.strip()}")
        elif line.strip():
            pending = (number, line.strip())
        if not continued and pending is not None:
            found.append(pending)
            pending = None
    if pending is not None:
        found.append(pending)
    return found


def _requirement_text(line: str, where: str) -> str:
    """The requirement of one line, without its --hash options; what cannot be hash-locked is refused."""
    requirement, *options = _OPTION_START.split(line.strip())
    if requirement.startswith("-"):
        flag = requirement.split("=", 1)[0].split()[0]
        if flag in ("-e", "--editable"):
            raise UsageError(f"{where}: {line} is an editable install, which cannot be hash-locked; {_FIX}")
        raise UsageError(
            f"{where}: option {flag} is not read by reprobox lock; remove it (say where wheels come from "
            "with --find-links DIR or --no-index on the command line, or in pip's configuration)"
        )
    for option in options:
        if not _HASH_OPTION.match(option):
            raise UsageError(
                f"{where}: option {option.split('=')[0].split()[0]} is not read by reprobox lock; "
                "remove it from the line"
            )
    check_requirement(requirement, where)
    return requirement


def check_requirement(text: str, where: str) -> None:
    """Refuse a requirement that names no package by version: VCS, URL, local path or archive."""
    if _VCS.search(text):
        raise UsageError(
            f"{where}: {text} is a VCS requirement, which cannot be hash-locked; {_FIX} (build it with "
            "`pip wheel --no-deps -w DIR URL`)"
        )
    if "://" in text or text.startswith("file:") or re.match(r"^[A-Za-z0-9._-]+\s*(\[[^\]]*\])?\s*@", text):
        raise UsageError(
            f"{where}: {text} is a URL or direct reference, which reprobox lock cannot lock from an index; "
            + _FIX
        )
    if text.startswith((".", "/", "~")) or text.split(";", maxsplit=1)[0].strip().endswith(_ARCHIVE):
        raise UsageError(
            f"{where}: {text} is a local path, which cannot be hash-locked from an index; {_FIX} "
            "(build it with `pip wheel --no-deps -w DIR PATH`)"
        )
    if not _NAME.match(text):
        raise UsageError(
            f"{where}: {text!r} is not a requirement; write NAME[extras] SPECIFIERS ; MARKERS, "
            "e.g. tqdm>=4.66 or rich; python_version >= '3.11'"
        )


def _pyproject_requirements(path: Path, text: str) -> tuple[Requirement, ...]:
    """`[project] dependencies` of a pyproject.toml, each located by its line where it can be found."""
    data = _toml(path, text)
    project = data.get("project")
    if not isinstance(project, dict):
        raise UsageError(
            f"{path} has no [project] table, so it lists no dependencies; add `[project] dependencies = "
            "[...]` or pass a requirements.in"
        )
    dynamic = project.get("dynamic", [])
    if isinstance(dynamic, list) and "dependencies" in dynamic:
        raise UsageError(
            f"{path}: [project] dependencies are dynamic (computed by the build backend), which reprobox "
            "lock cannot read; list them in a requirements.in and lock that"
        )
    dependencies = project.get("dependencies", [])
    if not isinstance(dependencies, list) or not all(isinstance(item, str) for item in dependencies):
        raise UsageError(f'{path}: [project] dependencies must be a list of strings, e.g. ["tqdm>=4.66"]')
    if not dependencies:
        raise UsageError(
            f"{path} has no [project] dependencies, so there is nothing to lock; add them there "
            '(dependencies = ["tqdm>=4.66"]) or pass a requirements.in'
        )
    lines = text.splitlines()
    found = []
    for item in dependencies:
        number = next((n for n, line in enumerate(lines, 1) if f'"{item}"' in line or f"'{item}'" in line), 0)
        where = f"{path}:{number}" if number else f"{path}: [project] dependencies"
        check_requirement(item.strip(), where)
        found.append(Requirement(item.strip(), where))
    return tuple(found)


def _toml(path: Path, text: str) -> dict[str, Any]:
    """The parsed TOML, with the standard library's reader (Python 3.11+) or tomli where it is installed."""
    for name in ("tomllib", "tomli"):
        try:
            reader = importlib.import_module(name)
        except ImportError:
            continue
        try:
            data: dict[str, Any] = reader.loads(text)
        except reader.TOMLDecodeError as exc:
            raise UsageError(f"{path} is not valid TOML ({exc}); fix the file") from None
        return data
    raise EnvironmentProblem(
        f"reading {path} needs Python 3.11 or the tomli package; install tomli beside reprobox, "
        "or list the dependencies in a requirements.in"
    )
