"""Runs of a fixed commit, kept for the next diff against it: a pull request's CI reruns only its own side.

An entry is keyed by what decides the run's numbers: the code tree at the commit, the resolved job
(its file, seed, settings), the step limit, and the runtime with its stack (the image id for
containers, the interpreter for local runs). Reuse is checked once more after the fresh side has
run: a cached run whose fingerprint differs from it in a field that affects numerics is run again.
Entries are small JSON files naming the run directory, written atomically.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from reprobox import stackdiff
from reprobox.errors import ReproboxError
from reprobox.fileio import write_json_atomic
from reprobox.jobfile import JobSpec
from reprobox.records.manifest import RunRecord, read_record
from reprobox.runtimes.base import Runtime
from reprobox.saferead import read_json

CACHE_DIR = "cache"
ENTRY_LIMIT = 64 << 10


def cache_key(tree_digest: str, job: JobSpec, runtime: Runtime, max_steps: int | None) -> str:
    facts = runtime.describe()
    facts.pop("engine", None)  # the engine's version does not reach the job's numbers
    facts.pop("host", None)
    identity = {
        "code": tree_digest,
        "job": job.to_json(),
        "max_steps": max_steps,
        "runtime": facts,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def cached_run(folder: Path, key: str) -> RunRecord | None:
    """The kept run for this key, if it is still there and succeeded."""
    entry = folder / CACHE_DIR / f"{key}.json"
    if not entry.is_file():
        return None
    try:
        data = read_json(entry, limit=ENTRY_LIMIT)
        record = read_record(Path(str(data["run"])))
    except (ReproboxError, KeyError, TypeError, OSError, ValueError):  # gone or damaged: run it again
        return None
    return record if record.succeeded else None


def keep_run(folder: Path, key: str, record: RunRecord) -> None:
    if not record.succeeded:
        return
    target = folder / CACHE_DIR / f"{key}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    entry: dict[str, Any] = {"run": str(record.run_dir), "key": key}
    write_json_atomic(target, entry)


def numerics_stack_differences(a: RunRecord, b: RunRecord) -> list[str]:
    """The stack fields that affect numerics and differ between two runs ([] when none do)."""
    return [d.label for d in stackdiff.diff_fingerprints(a.fingerprint, b.fingerprint) if d.affects_numerics]
