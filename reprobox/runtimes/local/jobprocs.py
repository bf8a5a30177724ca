"""Find and stop every process of a local job, including ones that left its process group.

A job may call setsid (a daemon, a `setsid cmd &`) and outlive the group the runtime kills. Each job
process is found three ways, read from /proc before anything is signalled: its process group, its
descent from the guest, and the run id in its environment (which an orphan keeps after its parent
died). Processes are stopped (SIGSTOP) before they are killed, so a forking loop cannot outrun us.
A process that started before the guest cannot be one of the job's: given the guest's start, the
search reads no more of it than its stat line (a busy machine's hundreds of environments are not read).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reprobox.guest import settings

PROC = Path("/proc")
KILL_ROUNDS = 20


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    pgid: int
    environ: bytes
    started: int = 0  # clock ticks after boot (field 22 of /proc/PID/stat)


def start_ticks(pid: int) -> int:
    """When the process started, in clock ticks after boot; 0 when it is gone or unreadable."""
    return _started(_stat_fields(pid))


def _started(fields: list[str]) -> int:
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else 0


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat from its third field on (the command name may hold spaces and parentheses)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return []
    return stat[stat.rfind(")") + 2 :].split()


def _read(pid: int, started_since: int = 0) -> ProcessInfo | None:
    fields = _stat_fields(pid)
    if len(fields) < 3 or fields[0] == "Z":  # a zombie is already dead; its parent reaps it
        return None
    started = _started(fields)
    if started < started_since:  # older than the job: none of its processes
        return None
    try:
        environ = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        environ = b""
    return ProcessInfo(pid, int(fields[1]), int(fields[2]), environ, started)


def _pids() -> list[int]:
    try:
        return [int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit()]
    except OSError:
        return []


def processes(started_since: int = 0) -> list[ProcessInfo]:
    """Every live process of this user that /proc shows (others' environments are unreadable anyway),
    started no earlier than ``started_since`` (clock ticks after boot)."""
    me = os.getuid()
    found = []
    for pid in _pids():
        with contextlib.suppress(OSError):
            if (PROC / str(pid)).stat().st_uid != me:
                continue
        info = _read(pid, started_since)
        if info is not None:
            found.append(info)
    return found


def env_value(info: ProcessInfo, name: str) -> str | None:
    prefix = name.encode() + b"="
    for entry in info.environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None


def job_processes(
    leader: int, run_id: str | None, table: Iterable[ProcessInfo] | None = None, *, started_since: int = 0
) -> set[int]:
    """The pids of the job whose guest is `leader` (also its process group) and whose run id is given;
    ``started_since``: the guest's start (``start_ticks``), before which no process of the job began."""
    rows = list(processes(started_since) if table is None else table)
    children: dict[int, list[int]] = {}
    for row in rows:
        children.setdefault(row.ppid, []).append(row.pid)
    found = {row.pid for row in rows if row.pgid == leader}
    if run_id:
        found |= {row.pid for row in rows if env_value(row, settings.RUN_ID) == run_id}
    pending = list(found)  # the leader leads its group while it lives; a reaped pid is never walked
    while pending:
        for child in children.get(pending.pop(), []):
            if child not in found:
                found.add(child)
                pending.append(child)
    found.discard(os.getpid())  # never ourselves, whatever a job put in our way
    return found


def signal_all(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def kill_job(leader: int, run_id: str | None, started_since: int = 0) -> None:
    """SIGKILL every process of the job; stop them first and look again until none is left."""
    for _round in range(KILL_ROUNDS):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signal.SIGKILL)
        pids = job_processes(leader, run_id, started_since=started_since)
        if not pids:
            return
        signal_all(pids, signal.SIGSTOP)
        signal_all(pids, signal.SIGKILL)
