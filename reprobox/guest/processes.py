"""The job's processes: its command started in our process group with termination signals forwarded,
and, once it ends, every process it left behind stopped (a background job, a double-forked daemon),
so that nothing still writes to its outputs while they are hashed. Their pids are recorded while they
run (``PidWatch``): a pid a job writes into its logs is run-specific by that record, not by its look."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from reprobox.records.guest import GuestRecord

GRACE_SECONDS = 5.0
PR_SET_CHILD_SUBREAPER = 36
MAX_PIDS = 4096
FIRST_LOOK_S = 0.02
LONGEST_LOOK_S = 1.0


def become_subreaper() -> bool:
    """Adopt the job's orphans (Linux): a process that double-forks away, even with a cleared
    environment and a session of its own, stays our descendant, so stopping the job finds it."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def run_command(
    command: list[str],
    env: dict[str, str],
    *,
    cwd: Path | None = None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> tuple[int, GuestRecord]:
    """Run the command in our process group, forward termination signals, stop leftovers after it.

    Returns our own exit status and how the command ended (exit code or signal, processes stopped).
    """
    become_subreaper()
    try:
        child = subprocess.Popen(command, env=env, cwd=cwd)
    except OSError as exc:
        sys.stderr.write(f"reprobox: cannot start {command[0]!r}: {exc.strerror}\n")
        return 127, GuestRecord(exit_code=127, error=f"cannot start {command[0]!r}: {exc.strerror}")

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    pids = PidWatch(child.pid)
    if on_start is not None:
        on_start(child)
    returncode = child.wait()
    pids.look()  # what it left behind, before that is stopped
    stopped = stop_other_group_members()
    ended = GuestRecord(
        exit_code=returncode if returncode >= 0 else None,
        signal=-returncode if returncode < 0 else None,
        stray_processes_stopped=stopped or None,
        run_facts={"pids": pids.finish(), "programs": pids.programs_seen()},
    )
    return (returncode if returncode >= 0 else 128 - returncode), ended


class PidWatch:
    """The pids of the job's processes, looked for while it runs: our descendants (the job's children,
    and the orphans we adopt as a subreaper), often at first, then every second at most."""

    def __init__(self, first: int) -> None:
        self.seen: set[int] = {first}
        self.lifetimes: dict[int, list[float]] = {}  # pid -> [first, last] time seen
        self.programs: dict[int, tuple[str, str]] = {}  # pid -> its executable's name and its parent's
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="reprobox-pids", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        pause = FIRST_LOOK_S
        while not self._stop.wait(pause):
            self.look()
            pause = min(pause * 1.5, LONGEST_LOOK_S)

    def look(self) -> None:
        if len(self.seen) >= MAX_PIDS:
            return
        now = time.monotonic()
        for pid in list(descendants(os.getpid()))[: MAX_PIDS - len(self.seen)]:
            self.seen.add(pid)
            self.lifetimes.setdefault(pid, [now, now])[1] = now
            if pid not in self.programs:
                self.programs[pid] = (_program(pid), _program(_parent(pid)))

    def finish(self) -> list[int]:
        self._stop.set()
        self._thread.join(timeout=5)
        return sorted(self.seen)

    def programs_seen(self) -> dict[str, dict[str, object]]:
        """Each process's program and its parent's (``python3.11`` started ``wandb-core``), and for how
        long it was seen alive: the run's record says which of them kept no record of its clocks."""
        return {
            str(pid): {"program": program, "parent": parent, "seen_s": round(last - first, 3)}
            for pid, (first, last) in sorted(self.lifetimes.items())
            for program, parent in [self.programs.get(pid, ("", ""))]
            if program
        }


def _program(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/exe").readlink().name
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def descendants(root: int) -> set[int]:
    """Every live descendant of a process, through /proc/PID/task/TID/children (Linux); none elsewhere."""
    found: set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        for children in _children_files(pid):
            try:
                text = children.read_text()
            except OSError:
                continue
            for child in text.split():
                if int(child) not in found:
                    found.add(int(child))
                    todo.append(int(child))
    return found


def _children_files(pid: int) -> list[Path]:
    try:
        return [task / "children" for task in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return []


def stop_other_group_members() -> int:
    """SIGTERM, then SIGKILL, every other process of our process group (background jobs left behind)."""
    me = os.getpid()
    table = _process_table()  # one look at every process: /proc is read once, not once per ancestor
    live = {pid: (ppid, group) for pid, (state, ppid, group) in table.items() if pid != me and state != "Z"}
    if me == 1:  # PID 1 of a container: every other process in it is the job's
        members = list(live)
    elif os.getpgrp() == me:  # our own process group, as the local runtime starts us, and what we adopted
        members = [pid for pid, (_, group) in live.items() if group == me or _descends(pid, me, table)]
    else:  # started inside someone else's group: only our descendants are ours
        members = [pid for pid in live if _descends(pid, me, table)]
    if not members:
        return 0
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + (GRACE_SECONDS if sig == signal.SIGTERM else 1.0)
        while time.monotonic() < deadline and any(_alive(pid) for pid in members):
            _reap()
            time.sleep(0.02)
        _reap()
        if not any(_alive(pid) for pid in members):
            break
    return len(members)


def _all_pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _process_table() -> dict[int, tuple[str, int, int]]:
    """Every process's state, parent and process group, from one pass over /proc."""
    table = {}
    for pid in _all_pids():
        stat = _stat_fields(pid)
        if stat is not None:
            table[pid] = (stat[0], int(stat[1]), int(stat[2]))
    return table


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: state, ppid, pgrp, ..."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _descends(pid: int, ancestor: int, table: dict[int, tuple[str, int, int]]) -> bool:
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        entry = table.get(pid)
        if entry is None:
            return False
        pid = entry[1]
        if pid == ancestor:
            return True
    return False


def _alive(pid: int) -> bool:
    stat = _stat_fields(pid)
    return stat is not None and stat[0] != "Z"


def _reap() -> None:
    """Collect exited children (orphans re-parented to us when we are PID 1 in a container)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
