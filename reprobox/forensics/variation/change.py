"""What one value of a factor changes about a run (`Change`), and the facts values depend on (`Machine`)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reprobox.guest import settings
from reprobox.jobfile import JobSpec
from reprobox.runner import RunOptions


@dataclass(frozen=True)
class Change:
    """What one value of a factor changes about a run; empty changes nothing."""

    env: Mapping[str, str] = field(default_factory=dict)  # extra guest environment
    variation: Mapping[str, object] = field(default_factory=dict)  # `Variation` fields
    reverse_env: bool = False  # the job's environment variables in reverse order
    nproc_per_node: int | None = None  # torchrun's processes per node

    def merged(self, other: Change) -> Change:
        """This change with `other` applied over it (later values win)."""
        return Change(
            env={**self.env, **other.env},
            variation={**self.variation, **other.variation},
            reverse_env=self.reverse_env or other.reverse_env,
            nproc_per_node=other.nproc_per_node if other.nproc_per_node is not None else self.nproc_per_node,
        )

    def describe(self) -> str:
        """The change in a few words, for the matrix ("TZ=UTC0", "hostname=x")."""
        ours = (settings.DETERMINISM, settings.LOCALES)
        parts = [f"{k}={v}" for k, v in sorted(self.env.items()) if k not in ours]
        if settings.LOCALES in self.env:
            names = ", ".join(self.env[settings.LOCALES].split(":"))
            parts.insert(0, f"LC_ALL=the first installed of {names} (not the job's own)")
        if settings.DETERMINISM in self.env:
            threads = json.loads(self.env[settings.DETERMINISM]).get("threads")
            parts.insert(0, f"threads={threads}")
        parts += [f"{k}={_show(k, v)}" for k, v in sorted(self.variation.items())]
        if self.reverse_env:
            parts.append("job env reversed")
        if self.nproc_per_node is not None:
            parts.append(f"nproc_per_node={self.nproc_per_node}")
        return ", ".join(parts) or "as the runtime runs it"


def _show(name: str, value: object) -> str:
    return f"{value:04o}" if name == "umask" and isinstance(value, int) else str(value)


@dataclass(frozen=True)
class Machine:
    """Facts about the job and this machine that the factors' values depend on."""

    job: JobSpec
    cpus: int
    threads_used: int | None = None  # torch's intra-op threads in the baseline run, once it ran
    mentioned: frozenset[str] = frozenset()  # which of the WATCHED names the job's files mention

    @classmethod
    def probe(cls, job: JobSpec, watched: tuple[str, ...] = ()) -> Machine:
        return cls(job=job, cpus=os.cpu_count() or 1, mentioned=job_mentions(job, watched))

    def after_baseline(self, fingerprint: Mapping[str, Any]) -> Machine:
        """These facts with what the baseline run used (its fingerprint), for values chosen after it."""
        threads = (fingerprint.get("software") or {}).get("threads") or {}
        used = threads.get("torch_intra_op")
        return replace(self, threads_used=used if isinstance(used, int) and used > 0 else None)


MENTION_FILE_LIMIT = 4 * 1024 * 1024  # larger files are data, not code or configs
MENTION_FILES_LIMIT = 20_000


def job_mentions(job: JobSpec, names: tuple[str, ...]) -> frozenset[str]:
    """The `names` (environment variables a factor sets) that the job file or its code folder mentions.

    A factor that only reaches jobs which read its variable would otherwise be called invariant for a
    job that never reads it: a claim that proves nothing. Hidden folders and caches are skipped.
    """
    texts = [*job.command, *job.env.values()]
    found = {name for name in names if any(name in text for text in texts)}
    for scanned, path in enumerate(_code_files(Path(job.code))):
        if found == set(names) or scanned >= MENTION_FILES_LIMIT:
            break
        try:
            if path.is_symlink() or path.stat().st_size > MENTION_FILE_LIMIT:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        found |= {name for name in names if name.encode() in data}
    return frozenset(found)


def _code_files(root: Path) -> Iterator[Path]:
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d != "__pycache__")
        yield from (Path(folder, name) for name in sorted(files))


def apply_change(job: JobSpec, options: RunOptions, change: Change) -> tuple[JobSpec, RunOptions]:
    """The job and run options of a run with `change` made: guest environment, runtime variation,
    the job's environment order, its world size. Nothing else about the run differs."""
    if change.reverse_env:
        job = job.with_overrides(env=dict(reversed(list(job.env.items()))))
    if change.nproc_per_node is not None:
        job = job.with_overrides(launcher=replace(job.launcher, nproc_per_node=change.nproc_per_node))
    options = replace(
        options,
        extra_env={**options.extra_env, **change.env},
        variation=replace(options.variation, **dict(change.variation)),  # type: ignore[arg-type]
    )
    return job, options
