"""Requirements locks as pip's --require-hashes reads them: each pin with its file and line, and the
job's own lock checked against the image's."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from reprobox.errors import UsageError

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*===?\s*([^\s;\\]+)")
_HASH_OPTION = re.compile(r"--hash[=\s]")


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


def _with_hash(line: LockLine, text: str) -> LockLine:
    if line.hashed or not _HASH_OPTION.search(text):
        return line
    return LockLine(line.path, line.line, line.name, line.version, hashed=True)


def check_extra_lock(extra: Path, base_lock: Path) -> list[LockLine]:
    """The job's lock as pip's --require-hashes needs it: each line `name==version --hash=...`, and no
    package pinned by the image's own lock at another version. Returns its requirements."""
    lines = lock_lines(extra)
    base = {line.name: line for line in lock_lines(base_lock)}
    for line in lines:
        if line.version is None or not line.hashed:
            raise UsageError(
                f"{extra}:{line.line}: {line.name!r} must be pinned as `name==version --hash=sha256:...` "
                "for a hash-checked install; lock the file with `reprobox lock`"
            )
        clash = base.get(line.name)
        if clash is not None and clash.version != line.version:
            raise UsageError(
                f"{extra}:{line.line}: {line} conflicts with {clash} in "
                f"{base_lock.parent.name}/{base_lock.name}:{clash.line}, which the image installs; "
                f"pin {clash} or drop the line "
                "(`reprobox lock` resolves against the image's lock)"
            )
    return lines
