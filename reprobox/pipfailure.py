"""pip's failures in an image build, told as one sentence that names the lock line and the fix.

The image installs every package with `pip install --require-hashes` from hash-locked files; when that
step fails, pip's own output (retries, URLs, hash tables) says what happened in its own terms. This pure
function reads the build log and answers with a `reprobox.errors` class instead: an environment problem
(exit 4) for a wheel that cannot be had, a bad input (exit 2) for a lock that does not pin what its
packages need. It answers None for anything it does not recognise, so the engine's message stands.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from reprobox import image as image_module
from reprobox.errors import EnvironmentProblem, ReproboxError, UsageError
from reprobox.offline import offline_path

_ANSI = re.compile(r"\x1b\[[0-9;]*m|\[9[0-9]m|\[0m")
_NOT_FOUND = re.compile(
    r"No matching distribution found for ([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)"
)
_NO_NETWORK = re.compile(
    r"Could not fetch URL|Retrying \(Retry\(|NewConnectionError|Temporary failure in name resolution|"
    r"SSLError|Network is unreachable|ConnectTimeout|ProxyError"
)
_HASH_MISMATCH = "THESE PACKAGES DO NOT MATCH THE HASHES"
_HASHES_MISSING = "Hashes are required in --require-hashes mode, but they are missing"
_PINNED_LINE = re.compile(r"^\s+([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
_CHECK_CONFLICT = re.compile(
    r"^([A-Za-z0-9][A-Za-z0-9._-]*) (\S+) (?:has requirement|requires) (.+?)"
    r"(?:, but you have (.+?)|,? which is not installed)\.?$"
)
_FIX_WHEELS = "reprobox lock --wheelhouse"
_RELOCK = "reprobox lock REQUIREMENTS_IN -o LOCK"


def explain_pip_failure(log: Sequence[str], plan: image_module.BuildPlan) -> ReproboxError | None:
    """The error to show for a failed install step of `plan`'s build, from the build's output lines."""
    lines = [_ANSI.sub("", line).rstrip() for line in log]
    text = "\n".join(lines)
    locks = _plan_locks(plan)
    if _HASH_MISMATCH in text:
        return _hash_mismatch(lines, locks, plan)
    if _HASHES_MISSING in text:
        return _unpinned_dependencies(lines, locks, plan)
    found = _NOT_FOUND.search(text)
    if found:
        return _not_found(image_module.normalize_name(found.group(1)), found.group(2), text, locks, plan)
    for line in lines:
        conflict = _CHECK_CONFLICT.match(line.strip())
        if conflict:
            return _check_conflict(conflict, plan)
    return None


def _plan_locks(plan: image_module.BuildPlan) -> list[image_module.LockLine]:
    sources = {member.name: member.source for member in plan.files}
    paths = [sources[plan.lock]] if plan.lock in sources else []
    if plan.extra_requirements is not None:
        paths.append(plan.extra_requirements)
    return [line for path in paths for line in image_module.lock_lines(path)]


def _where(name: str, locks: Sequence[image_module.LockLine]) -> str:
    for line in locks:
        if line.name == name:
            return f" ({_shown(line.path)}:{line.line})"
    return ""


def _not_found(
    name: str, version: str, text: str, locks: Sequence[image_module.LockLine], plan: image_module.BuildPlan
) -> ReproboxError:
    pin = f"{name}=={version}{_where(name, locks)}"
    if not plan.offline:
        cause = "no package index answered" if _NO_NETWORK.search(text) else "the package index has no wheel"
        return EnvironmentProblem(
            f"building image {plan.tag} needs {pin}, but it has no wheelhouse and {cause}; "
            f"{offline_path('DIR', *_filling(plan))}"
        )
    houses = " and ".join(str(house) for house in plan.wheelhouses)
    return EnvironmentProblem(
        f"the wheelhouse ({houses}) holds no wheel of {pin} that installs on the image's Python "
        f"(CPython 3.11, Linux x86_64); {offline_path(plan.wheelhouses[0], *_filling(plan))}"
    )


def _filling(plan: image_module.BuildPlan) -> tuple[list[str], str]:
    """What fills a wheelhouse for `plan`: its job's lock, if any, and the image's lock by name."""
    names = {path: name for name, path in image_module.LOCKS.items()}
    locked = [_shown(plan.extra_requirements)] if plan.extra_requirements is not None else []
    return locked, names.get(plan.lock, plan.lock)


def _hash_mismatch(
    lines: Sequence[str], locks: Sequence[image_module.LockLine], plan: image_module.BuildPlan
) -> ReproboxError:
    start = next(i for i, line in enumerate(lines) if _HASH_MISMATCH in line)
    for line in lines[start + 1 :]:
        pinned = _PINNED_LINE.match(line)
        if pinned:
            name = image_module.normalize_name(pinned.group(1))
            pin = f"{name}=={pinned.group(2)}{_where(name, locks)}"
            break
    else:
        pin = "a locked package"
    where = f" in {' or '.join(str(h) for h in plan.wheelhouses)}" if plan.offline else ""
    return EnvironmentProblem(
        f"the wheel of {pin}{where} does not match the lock's sha256; delete it and fetch it again with "
        f"`{_FIX_WHEELS} DIR --locked LOCK`, or relock with {_RELOCK} if the lock is the stale one"
    )


def _unpinned_dependencies(
    lines: Sequence[str], locks: Sequence[image_module.LockLine], plan: image_module.BuildPlan
) -> ReproboxError:
    start = next(i for i, line in enumerate(lines) if _HASHES_MISSING in line)
    locked = {line.name for line in locks}
    names = []
    for line in lines[start + 1 :]:
        pinned = _PINNED_LINE.match(line)
        if pinned and image_module.normalize_name(pinned.group(1)) not in locked:
            names.append(f"{image_module.normalize_name(pinned.group(1))}=={pinned.group(2)}")
    lock = _shown(plan.extra_requirements) if plan.extra_requirements is not None else plan.lock
    needed = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "") if names else "some dependencies"
    return UsageError(
        f"{lock} does not pin {needed}, which the packages it locks need; relock it with {_RELOCK} "
        "(it resolves every dependency against the image's own lock)"
    )


def _check_conflict(conflict: re.Match[str], plan: image_module.BuildPlan) -> ReproboxError:
    lock = _shown(plan.extra_requirements) if plan.extra_requirements is not None else plan.lock
    have = f" but the image has {conflict.group(4)}" if conflict.group(4) else " which is not installed"
    return UsageError(
        f"{conflict.group(1)} {conflict.group(2)} from {lock} requires {conflict.group(3)},{have}; "
        f"relock it with {_RELOCK} (it resolves against the image's own lock)"
    )


def _shown(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)
