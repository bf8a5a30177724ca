"""`reprobox lock` as one call: read the requirements, resolve them on top of the image's lock, fill the
wheelhouse, and only then write the lock, so a failure at any step leaves the lock file as it was."""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobox.errors import UsageError
from reprobox.fileio import write_text_atomic
from reprobox.locking._base import BaseLock, base_lock
from reprobox.locking._fill import Wheelhouse, check_hashed, fill_wheelhouse
from reprobox.locking._inputs import read_requirements
from reprobox.locking._resolve import Resolution, lock_text, resolve
from reprobox.locking._sources import pip_settings, usable_target
from reprobox.locking._target import DEFAULT_PYTHON_VERSION, Target
from reprobox.offline import WHEELHOUSE_VARIABLE


@dataclass(frozen=True)
class LockOptions:
    """What `reprobox lock` was asked for; the CLI has checked that the flags go together."""

    requirements: Path | None = None  # a requirements file or pyproject.toml to lock
    output: Path | None = None  # the lock to write (with `requirements`)
    base: str | None = None  # cpu, cuda, a lock file, or None for the build's own choice
    target: Target = field(default_factory=Target)
    wheelhouse: Path | None = None  # fill it with the wheels of the locks below
    image_lock: bool = False  # the wheelhouse gets the image's lock's wheels too
    locked: tuple[Path, ...] = ()  # locks already written whose wheels the wheelhouse gets

    @property
    def needs_base(self) -> bool:
        """Whether the image's lock plays a part (only filling a wheelhouse from given locks needs none)."""
        return self.requirements is not None or self.image_lock or not self.locked


@dataclass(frozen=True)
class LockReport:
    """What `reprobox lock` did: the lock written with its packages, and the wheelhouse filled."""

    options: LockOptions
    base: BaseLock | None
    resolution: Resolution | None
    wheelhouse: Wheelhouse | None

    def to_json(self) -> dict[str, Any]:
        options = self.options
        return {
            "lock": str(options.output) if options.output is not None else None,
            "source": str(options.requirements) if options.requirements is not None else None,
            "base": str(self.base.path) if self.base is not None else None,
            "target": options.target.describe(),
            "python_version": options.target.python_version,
            "packages": [p.to_json() for p in self.resolution.packages] if self.resolution else [],
            "left_out": [
                {"name": p.name, "version": p.version}
                for p in (self.resolution.left_out if self.resolution else ())
            ],
            "wheelhouse": self.wheelhouse.to_json() if self.wheelhouse is not None else None,
        }


def run_lock(options: LockOptions, environ: Mapping[str, str] | None = None) -> LockReport:
    """Lock `options.requirements` into `options.output` and/or fill `options.wheelhouse`; nothing is
    written to the lock unless every step succeeded."""
    environ = os.environ if environ is None else environ
    requirements = read_requirements(options.requirements) if options.requirements is not None else None
    base = base_lock(options.base, environ) if options.needs_base else None
    for lock in options.locked:
        check_hashed(lock)
    if (
        requirements is not None
        and options.output is not None
        and _same_file(options.output, requirements.source)
    ):
        raise UsageError(
            f"-o {options.output} is the requirements file itself; write the lock to another file, "
            "e.g. -o requirements.lock"
        )
    settings = pip_settings()
    target = usable_target(settings, options.target, options.wheelhouse)  # no index answers: said at once
    resolution = None
    text = ""
    if requirements is not None and base is not None:
        resolution = resolve(requirements, base, target, settings)
        text = lock_text(
            resolution,
            source=requirements.source.as_posix(),
            base=base.shown(),
            target=options.target,
            command=regenerate_command(options, base),
        )
    wheelhouse = None
    if options.wheelhouse is not None:
        wheelhouse = _fill(options, base, text, target)
    if options.output is not None and resolution is not None:
        write_text_atomic(options.output, text, mode=None)
    return LockReport(options, base, resolution, wheelhouse)


def shared_wheelhouse(environ: Mapping[str, str]) -> Path | None:
    """The wheelhouse image builds read ($REPROBOX_WHEELHOUSE), where one is set: `reprobox lock` and
    `reprobox init` fill it with every lock they write, so the build that follows finds its wheels."""
    value = environ.get(WHEELHOUSE_VARIABLE, "").strip()
    return Path(value) if value else None


def regenerate_command(options: LockOptions, base: BaseLock) -> str:
    """The `reprobox lock` command that makes this lock again, whatever the environment says."""
    words = ["reprobox", "lock", str(options.requirements), "-o", str(options.output)]
    words += ["--base", base.argument]
    if options.target.python_version != DEFAULT_PYTHON_VERSION:
        words += ["--python-version", options.target.python_version]
    if options.target.no_index:
        words.append("--no-index")
    for source in options.target.find_links:
        words += ["--find-links", source]
    return shlex.join(words)


def _fill(options: LockOptions, base: BaseLock | None, text: str, target: Target) -> Wheelhouse:
    """Fill the wheelhouse with the new lock (read from a scratch copy: it is not written yet), the
    image's lock where asked, and the locks given; the wheelhouse reports the lock's real path."""
    assert options.wheelhouse is not None
    image_locks = (
        [base.path] if base is not None and (options.image_lock or options.requirements is None) else []
    )
    with tempfile.TemporaryDirectory(prefix="reprobox-lock-") as folder:
        new = []
        if text and options.output is not None:
            scratch = Path(folder) / options.output.name
            scratch.write_text(text, encoding="utf-8")
            new = [scratch]
        labels = {lock: str(options.output) for lock in new}
        locks = [*new, *image_locks, *options.locked]
        filled = fill_wheelhouse(locks, options.wheelhouse, target, labels)
    written = [options.output] if new and options.output is not None else []
    return Wheelhouse(filled.path, (*written, *image_locks, *options.locked), filled.wheels)


def _same_file(one: Path, other: Path) -> bool:
    try:
        return one.resolve() == other.resolve()
    except OSError:
        return False
