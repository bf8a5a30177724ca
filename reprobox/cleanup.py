"""What a controller killed outright (kill -9, a lost node) left behind, and its removal.

Three kinds: containers labelled io.reprobox.managed, local job processes, and run dirs with no
manifest. Each carries the identity of the controller that made it (see `controller`); only those
whose controller is gone count. A controller on another host, or one that is alive, is never touched.
"""

from __future__ import annotations

import os
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox import controller
from reprobox.guest import settings
from reprobox.image import MANAGED_LABEL
from reprobox.records.manifest import MANIFEST_NAME
from reprobox.runtimes.local import jobprocs

if TYPE_CHECKING:  # the docker SDK is imported only where an engine is opened (images lack it)
    from reprobox.engine import Engine

CONTAINER, PROCESSES, RUN_DIR = "container", "processes", "run-dir"


@dataclass(frozen=True)
class Leftover:
    kind: str
    target: str  # container id, run id (processes) or run dir path
    reason: str
    pids: tuple[int, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "target": self.target, "reason": self.reason}
        if self.pids:
            data["pids"] = list(self.pids)
        return data


def _gone(owner: controller.Controller) -> str:
    return f"its controller (pid {owner.pid} on {owner.host}) is gone"


def find_processes(table: list[jobprocs.ProcessInfo] | None = None) -> list[Leftover]:
    """Local job processes, one leftover per run, whose controller is gone."""
    rows = jobprocs.processes() if table is None else table
    spared = _ancestors()
    runs: dict[str, list[int]] = {}
    owners: dict[str, controller.Controller] = {}
    for row in rows:
        owner = controller.decode(jobprocs.env_value(row, controller.CONTROLLER_VARIABLE) or "")
        if owner is None or row.pid in spared or owner.alive():
            continue
        run_id = jobprocs.env_value(row, settings.RUN_ID) or f"pid {row.pid}"
        runs.setdefault(run_id, []).append(row.pid)
        owners[run_id] = owner
    return [
        Leftover(PROCESSES, run_id, _gone(owners[run_id]), tuple(sorted(pids)))
        for run_id, pids in runs.items()
    ]


def find_containers(engine: Engine) -> list[Leftover]:
    """Containers of reprobox whose controller (named by their labels) is gone from this host."""
    found = []
    for container_id in engine.list_containers([MANAGED_LABEL]):
        facts = engine.inspect_container(container_id)
        labels = (facts.get("Config") or {}).get("Labels") or {}
        owner = controller.from_labels(labels)
        if owner is not None and not owner.alive():
            found.append(Leftover(CONTAINER, container_id, _gone(owner)))
    return found


def find_run_dirs(runs_dir: Path, busy_runs: set[str]) -> list[Leftover]:
    """Run dirs with no manifest (status unknown) that no live controller claims and no process runs."""
    found: list[Leftover] = []
    if not runs_dir.is_dir():
        return found
    for job_dir in sorted(runs_dir.iterdir()):
        if job_dir.is_symlink() or not job_dir.is_dir() or job_dir.name.startswith("."):
            continue
        for run_dir in sorted(job_dir.iterdir()):
            if run_dir.is_symlink() or not run_dir.is_dir() or run_dir.name.startswith("."):
                continue
            if (run_dir / MANIFEST_NAME).exists() or run_dir.name in busy_runs:
                continue
            owner = controller.claimant(run_dir)
            if owner is not None and owner.alive():
                continue
            reason = _gone(owner) if owner else "no controller claims it"
            found.append(Leftover(RUN_DIR, str(run_dir), f"no manifest and {reason}"))
    return found


def find_leftovers(runs_dir: Path, engine: Engine | None) -> list[Leftover]:
    table = jobprocs.processes()
    busy = {v for row in table if (v := jobprocs.env_value(row, settings.RUN_ID))}
    leftovers = find_processes(table)
    if engine is not None:
        leftovers += find_containers(engine)
    return leftovers + find_run_dirs(runs_dir, busy - {p.target for p in leftovers if p.kind == PROCESSES})


def remove(leftover: Leftover, engine: Engine | None) -> None:
    """Remove one leftover; raises OSError or EnvironmentProblem when that fails."""
    if leftover.kind == PROCESSES:
        jobprocs.signal_all(leftover.pids, signal.SIGSTOP)
        jobprocs.signal_all(leftover.pids, signal.SIGKILL)
    elif leftover.kind == CONTAINER and engine is not None:
        engine.remove_container(leftover.target)
    elif leftover.kind == RUN_DIR:
        run_dir = Path(leftover.target)
        shutil.rmtree(run_dir)
        controller.claim_path(run_dir).unlink(missing_ok=True)


def _ancestors() -> set[int]:
    """This process and its parents: `clean` run from inside a job never kills its own line."""
    spared, pid = set(), os.getpid()
    while pid > 1 and pid not in spared:
        spared.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
            pid = int(stat[stat.rfind(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return spared
