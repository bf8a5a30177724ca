"""What an author and a reviewer do by hand in the reproduce tests: publish a job (run it, attest next to
the job file), clone the published folder, edit an attestation as a forger would."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reprobox import attest
from reprobox.jobfile import load_job
from reprobox.records.manifest import RunRecord
from reprobox.runner import RunOptions, execute
from reprobox.runtimes.local import LocalRuntime

ROOT = Path(__file__).parents[1]
JOBS = ROOT / "tests" / "jobs"
EXAMPLES = ROOT / "examples"


def publish(source: Path, author: Path, *, runs: int) -> tuple[Path, list[RunRecord]]:
    """What an author does: run the job (runs kept outside the code), then attest next to the job file."""
    code = author / "code"
    shutil.copytree(source, code)
    spec = load_job(code / "job.yaml")
    records = [execute(spec, LocalRuntime(), RunOptions(runs_dir=author / "runs")) for _ in range(runs)]
    path = attest.write_attestation(
        attest.attestation_path_for(spec.job_file), attest.build_attestation(records)
    )
    return path, records


def fresh_copy(attestation: Path, where: Path) -> Path:
    """A reviewer's clone: the code folder with the attestation in it, and nothing else."""
    shutil.copytree(attestation.parent, where)
    return where / attest.ATTESTATION_NAME


def edit_attestation(path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    statement = json.loads(path.read_text())
    change(statement)
    path.write_text(json.dumps(statement))
    return path


def machine_strings_in(statement: Any, *, folders: list[Path], names: list[str]) -> list[str]:
    """Every string of an attestation that holds one of the writer's folders, or is their host or user
    name: what must never be published."""
    found: list[str] = []
    stack = [("", statement)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{where}.{k}", v) for k, v in value.items())
            stack.extend((f"{where}.<key>", k) for k in value)
        elif isinstance(value, list):
            stack.extend((f"{where}.{i}", v) for i, v in enumerate(value))
        elif isinstance(value, str) and (any(str(f) in value for f in folders) or value in names):
            found.append(f"{where}: {value[:120]}")
    return found
