"""pip's failures while locking or filling a wheelhouse, told as one sentence with the fix.

Pure functions over what pip printed and logged: a requirement pip cannot parse, a conflict with the
image's pins (the package and both versions), a package with no wheel for the image's platform, a
locked wheel whose hash differs, and no network (told from pip's debug log: at its default verbosity
pip says only that nothing was found). Anything else keeps pip's last error line and its output.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from reprobox import image
from reprobox.errors import EnvironmentProblem, ReproboxError, UsageError
from reprobox.locking._base import BaseLock
from reprobox.locking._inputs import Requirement
from reprobox.locking._pip import PipRun
from reprobox.locking._target import Target

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_NOT_FOUND = re.compile(
    r"Could not find a version that satisfies the requirement (?P<requirement>.+?)"
    r"(?: \(from (?P<parent>[^)]+)\))? \(from versions: (?P<versions>[^)]*)\)"
)
_CAUSES = re.compile(r"The conflict is caused by:\n((?:[ \t]+\S.*\n?)+)")
_USER_CONSTRAINT = re.compile(r"^The user requested \(constraint\) (?P<requirement>.+)$")
_USER_REQUESTED = re.compile(r"^The user requested (?P<requirement>.+)$")
_DEPENDS = re.compile(r"^(?P<parent>\S+ \S+) depends on (?P<requirement>.+)$")
_INVALID = re.compile(r"Invalid requirement: '(?P<requirement>.*?)': (?P<reason>[^\n]*)")
_FOUND = re.compile(r"Found link (?P<url>\S+?),? version: ", re.MULTILINE)
_SKIPPED = re.compile(r"Skipping link: (?P<why>.+?): (?P<url>\S+)\s*$", re.MULTILINE)
_NETWORK = re.compile(
    r"Could not fetch URL (?P<url>\S+): (?P<reason>(?:proxy )?connection error.*|.*timed out.*)"
    r"|(?P<other>Failed to establish a new connection|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|Max retries exceeded with url)"
)
_HASH_MISMATCH = re.compile(
    r"THESE PACKAGES DO NOT MATCH THE HASHES.*?\n\s+(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)",
    re.DOTALL,
)
_TOO_OLD = re.compile(r"no such option: (--\S+)")
_FIND_LINKS = "pass a folder holding the wheel with --find-links DIR"


@dataclass(frozen=True)
class Resolving:
    """What pip was asked to resolve: the requirements as written in `source`, on top of `base`, for
    `target`."""

    requirements: Sequence[Requirement]
    base: BaseLock
    target: Target
    source: Path


def resolution_failure(
    run: PipRun, requirements: Sequence[Requirement], base: BaseLock, target: Target, source: Path
) -> ReproboxError:
    """Why pip could not resolve `source` on top of `base` for `target`, as one sentence."""
    common = _common_failure(run, target)
    if common is not None:
        return common
    invalid = _INVALID.search(run.output)
    if invalid:
        written = _written(invalid.group("requirement"), requirements)
        where, text = (written.origin, written.text) if written else (str(source), invalid.group(1))
        return UsageError(
            f"{where}: {text!r} is not a valid requirement ({invalid.group('reason').strip()}); "
            "write NAME[extras] SPECIFIERS ; MARKERS, e.g. tqdm>=4.66"
        )
    causes = _CAUSES.search(run.output)
    if causes:
        lines = [line.strip() for line in causes.group(1).splitlines()]
        return _conflict(lines, run, Resolving(requirements, base, target, source))
    missing = _NOT_FOUND.search(run.output)
    if missing:
        return _no_wheel(missing, run, Resolving(requirements, base, target, source))
    return _unexplained(run, f"resolving {source}")


def download_failure(run: PipRun, lock: Path, target: Target, label: str) -> ReproboxError:
    """Why pip could not download the wheels of `lock` (named `label`) for `target`, as one sentence."""
    common = _common_failure(run, target)
    if common is not None:
        return common
    lines = {line.name: line for line in image.lock_lines(lock)}
    mismatch = _HASH_MISMATCH.search(run.output)
    if mismatch:
        name = image.normalize_name(mismatch.group("name"))
        pin = _pin_at(name, f"{name}=={mismatch.group('version')}", lines, label)
        return EnvironmentProblem(
            f"the wheel pip found for {pin} does not match the lock's sha256; the lock is stale or the "
            "wheel was altered: relock with `reprobox lock`, or delete that wheel and fetch it again"
        )
    missing = _NOT_FOUND.search(run.output)
    if missing:
        requirement = missing.group("requirement").strip()
        pin = _pin_at(_name(requirement), requirement, lines, label)
        where = "in the --find-links folders" if target.no_index else "in the package index"
        return EnvironmentProblem(
            f"no wheel of {pin} for {target.describe()} was found {where}; {_FIND_LINKS}, or relock "
            "with `reprobox lock` for versions that have one"
        )
    return _unexplained(run, f"downloading the wheels of {label}")


def _common_failure(run: PipRun, target: Target) -> ReproboxError | None:
    """An old pip, or no network: the same sentence whatever pip was doing."""
    old = _TOO_OLD.search(run.output)
    if old:
        return EnvironmentProblem(
            f"this pip has no {old.group(1)} option; reprobox lock needs pip 22.2 or later: upgrade it with "
            "`python -m pip install --upgrade pip`"
        )
    network = _NETWORK.search(run.log) or _NETWORK.search(run.output)
    if network and not target.no_index:
        what = (
            f"{network.group('url')}: {network.group('reason').removesuffix(' - skipping')}"
            if network.group("url")
            else network.group("other")
        )
        return EnvironmentProblem(
            f"pip could not reach the package index ({what}); reprobox lock needs the network: run it on a "
            "connected machine, with --wheelhouse DIR to keep the wheels for offline builds, and bring "
            "the lock and the wheelhouse here (or pass --no-index --find-links DIR with the wheels at hand)"
        )
    return None


def _conflict(causes: list[str], run: PipRun, asked: Resolving) -> ReproboxError:
    """A conflict: with one of the image's pins (named with both versions), or among the requirements.

    pip also calls it a conflict when a pinned version has no wheel it may install; its log, which
    lists every file it found, tells that case apart.
    """
    requirements, base, target, source = asked.requirements, asked.base, asked.target, asked.source
    pins = set(base.pins.items())
    pinned = next((pin for pin in map(_constraint_pin, causes) if pin is not None and pin in pins), None)
    wants = []
    for cause in causes:
        depends = _DEPENDS.match(cause)
        requested = _USER_REQUESTED.match(cause)
        constraint = _USER_CONSTRAINT.match(cause)
        if depends and (pinned is None or _name(depends.group("requirement")) == pinned[0]):
            wants.append(f"{depends.group('parent')} needs {depends.group('requirement')}")
        elif requested and not constraint and (pinned is None or _name(requested.group(1)) == pinned[0]):
            requirement = requested.group("requirement")
            written = _written(requirement, requirements)
            wants.append(f"{written.origin if written else source} asks for {requirement}")
        elif constraint and pinned is None:
            wants.append(f"a constraint asks for {constraint.group('requirement')}")
    wanted = _some(wants or causes, 3, "; ")
    if pinned is None:
        return UsageError(
            f"pip cannot satisfy {source} as a whole: {wanted}; loosen one of these requirements"
        )
    name, version = pinned
    if not _found(run.log, name, version):
        files = _skipped_files(run.log, name)
        found = f" (pip found only {_some(files, 4)})" if files else ""
        where = "in the --find-links folders" if target.no_index else "in the package index"
        return UsageError(
            f"{wanted}, and {name}=={version}, which the image's lock {base.shown()} pins, has no wheel for "
            f"{target.describe()} {where}{found}; {_FIND_LINKS}"
        )
    return UsageError(
        f"{wanted}, but the image's lock {base.shown()} pins {name}=={version}, which the image installs; "
        f"loosen the requirement (or pick a version of the package that accepts {name} {version}), or lock "
        "against another --base"
    )


def _constraint_pin(cause: str) -> tuple[str, str] | None:
    """(name, version) of a `The user requested (constraint) name==version` line."""
    constraint = _USER_CONSTRAINT.match(cause)
    if constraint is None or "==" not in constraint.group("requirement"):
        return None
    name, _, version = constraint.group("requirement").partition("==")
    return image.normalize_name(name.strip()), version.strip()


def _found(log: str, name: str, version: str) -> bool:
    """Whether pip's log lists a file of name==version it may install."""
    for found in _FOUND.finditer(log):
        filename = unquote(found.group("url").split("#", 1)[0].rsplit("/", 1)[-1])
        if image.wheel_pin(filename) == (name, version):
            return True
    return False


def _no_wheel(missing: re.Match[str], run: PipRun, asked: Resolving) -> ReproboxError:
    """Nothing pip may install matches a requirement: no wheel for the platform, or no such version."""
    requirements, base, target, source = asked.requirements, asked.base, asked.target, asked.source
    requirement = missing.group("requirement").strip()
    name = _name(requirement)
    parent = missing.group("parent")
    if parent:
        who = f"{parent} needs {requirement}: "
    else:
        written = _written(requirement, requirements)
        who = f"{written.origin if written else source}: "
    if name in base.pins:
        who = f"{who}{name}=={base.pins[name]}, which the image's lock {base.shown()} pins: "
    versions = missing.group("versions").strip()
    if versions != "none":
        return UsageError(
            f"{who}no version of {name} that matches has a wheel for {target.describe()} (versions with "
            f"one: {_some(versions.split(', '), 8)}); loosen the requirement, or, where a "
            f"package needs this version and it has a source archive alone, build its wheel (pip wheel "
            f"--no-deps '{requirement}' -w wheels) and pass --find-links wheels"
        )
    files = _skipped_files(run.log, name)
    if files:
        return UsageError(
            f"{who}{name} has no wheel for {target.describe()} (pip found only {_some(files, 4)}), and "
            f"the image installs wheels only; pick a version or a package that has one, or build the wheel "
            f"for that platform and {_FIND_LINKS}"
        )
    where = "in the --find-links folders" if target.no_index else "in the package index"
    return UsageError(f"{who}no package named {name} was found {where}; check the name, or {_FIND_LINKS}")


def _skipped_files(log: str, name: str) -> list[str]:
    """The files of `name` pip saw but passed over (other platforms, source archives)."""
    files = []
    for skipped in _SKIPPED.finditer(log):
        filename = unquote(skipped.group("url").split("#", 1)[0].rsplit("/", 1)[-1])
        stem = filename.split("-", 1)[0]
        if image.normalize_name(stem) == name and filename not in files:
            files.append(filename)
    return files


def _unexplained(run: PipRun, doing: str) -> ReproboxError:
    errors = [line.removeprefix("ERROR: ") for line in run.output.splitlines() if line.startswith("ERROR:")]
    last = errors[-1] if errors else f"exit status {run.returncode}"
    tail = "\n".join(run.output.splitlines()[-20:])
    return EnvironmentProblem(f"pip failed {doing}: {last}", log_tail=tail)


def _written(requirement: str, requirements: Sequence[Requirement]) -> Requirement | None:
    """The user's requirement that pip names: by its text, else by its package name."""
    text = " ".join(requirement.split())
    for candidate in requirements:
        if " ".join(candidate.text.split()) == text:
            return candidate
    name = _name(requirement)
    return next((candidate for candidate in requirements if _name(candidate.text) == name), None)


def _pin_at(name: str, pin: str, lines: dict[str, image.LockLine], label: str) -> str:
    """`pin` with the lock line that wants it."""
    line = lines.get(name)
    return f"{pin} ({label}:{line.line})" if line is not None else pin


def _name(requirement: str) -> str:
    match = _NAME.match(requirement)
    return image.normalize_name(match.group(1)) if match else requirement.strip()


def _some(items: Sequence[str], count: int, separator: str = ", ") -> str:
    return separator.join(items[:count]) + (f"{separator}..." if len(items) > count else "")
