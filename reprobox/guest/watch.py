"""Ends `reprobox init`'s observed run early: at its first checkpoint, or when its budget is spent.

The observation needs a short run, never a whole training: a thread of the guest watches the working
folder and, once a file that looks like a checkpoint has stopped growing, or once the budget is spent,
interrupts the job as Ctrl-C would (so its `finally` blocks and exit handlers run and record what it
imported), then terminates it if it has not ended ten seconds later, and kills it a minute after.
Why it stopped is written to `.reprobox/observe-stop.json` for the controller.

The budget counts the job's own CPU time (its processes', from /proc), not the clock: on a busy
machine a job makes progress slowly, and a fixed time by the clock would stop it before the checkpoint
it reaches on an idle one. The budget is spent once both the job's CPU time and the clock have reached
it, so a job waiting on the network or a sleep is not kept forever, and the clock bounds it at
WALL_FACTOR times the budget whatever the job does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from reprobox.guest import settings
from reprobox.records.observed import STOP_FILE

POLL_SECONDS = 0.5
GRACE_SECONDS = 10.0
RECORD_SECONDS = 60.0  # after the terminate, for the record of what the job imported to be written
WALL_FACTOR = 4.0  # the clock's bound on a budget: a job that gets a quarter of a core still gets it
MAX_WATCHED = 10_000  # files looked at per poll: a job writing more is stopped by its budget alone
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".npz", ".pkl", ".h5", ".msgpack")


class StopWatch:
    """Watches `folder` for a finished checkpoint and the clock for the budget; stops the child."""

    def __init__(self, folder: Path, run_dir: Path, budget: float, known: set[str]) -> None:
        self.folder, self.run_dir, self.budget = folder, run_dir, budget
        self.known = known  # files of the working copy before the job started (the code)
        self.sizes: dict[str, int] = {}
        self.done = threading.Event()

    def start(self, child: subprocess.Popen[bytes]) -> None:
        threading.Thread(target=self._watch, args=(child,), daemon=True).start()

    def finish(self) -> None:
        self.done.set()

    def _watch(self, child: subprocess.Popen[bytes]) -> None:
        started = time.monotonic()
        cpu: float | None = 0.0
        while not self.done.wait(POLL_SECONDS):
            found = self._finished_checkpoint()
            elapsed = time.monotonic() - started
            now = tree_cpu_seconds(child.pid)
            cpu = None if now is None or cpu is None else max(cpu, now)  # a child's exit takes its part
            if found is None and not self._spent(elapsed, cpu):
                continue
            reason = {"reason": "checkpoint", "file": found} if found else {"reason": "budget"}
            more = {"cpu_seconds": round(cpu, 1)} if cpu is not None else {}
            self._record({**reason, "seconds": round(elapsed, 1), **more})
            self._stop(child)
            return

    def _spent(self, elapsed: float, cpu: float | None) -> bool:
        """Whether the budget is spent: the clock's bound reached, or the clock and the job's CPU time
        both past the budget (the clock alone where the CPU time cannot be read)."""
        if elapsed >= wall_limit(self.budget):
            return True
        return elapsed >= self.budget and (cpu is None or cpu >= self.budget)

    def _finished_checkpoint(self) -> str | None:
        """A checkpoint-like file the job wrote whose size held still since the last look."""
        sizes: dict[str, int] = {}
        for path in _files(self.folder):
            relative = path.relative_to(self.folder).as_posix()
            if relative in self.known or not looks_like_checkpoint(path):
                continue
            try:
                sizes[relative] = path.stat().st_size
            except OSError:
                continue
        steady = sorted(r for r, size in sizes.items() if size > 0 and self.sizes.get(r) == size)
        self.sizes = sizes
        return steady[0] if steady else None

    def _record(self, data: dict[str, object]) -> None:
        path = self.run_dir / settings.GUEST_STATE / STOP_FILE
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(data, sort_keys=True))

    def _stop(self, child: subprocess.Popen[bytes]) -> None:
        """Ctrl-C, terminate, then kill: the job's record of its imports ignores the first two while it
        is written, so the kill waits longer (and still comes before the run's own timeout)."""
        for sig, wait in (
            (signal.SIGINT, GRACE_SECONDS),
            (signal.SIGTERM, RECORD_SECONDS),
            (signal.SIGKILL, GRACE_SECONDS),
        ):
            if child.poll() is not None:
                return
            child.send_signal(sig)
            try:
                child.wait(wait)
            except subprocess.TimeoutExpired:
                continue
            return


def wall_limit(budget: float) -> float:
    """The most seconds by the clock an observed run with this budget of CPU seconds may take."""
    return budget * WALL_FACTOR


def tree_cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user and system) of the process `pid` and every descendant alive, with what the
    children each of them waited for used; None where /proc cannot tell (not Linux)."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        entries = [entry.name for entry in Path("/proc").iterdir()]
    except (OSError, ValueError):
        return None
    parents: dict[int, int] = {}
    used: dict[int, int] = {}
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:  # noqa: PTH123 - one small read each
                text = handle.read()
        except OSError:
            continue
        fields = text[text.rfind(b")") + 2 :].split()  # after the command's name, which may hold spaces
        try:
            parents[int(name)] = int(fields[1])
            used[int(name)] = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
        except (IndexError, ValueError):
            continue
    if pid not in used:
        return None
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        total += used.get(current, 0)
        stack += children.get(current, [])
    return total / ticks


def _files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for current, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        found += [Path(current) / name for name in filenames]
        if len(found) >= MAX_WATCHED:
            break
    return found[:MAX_WATCHED]


def looks_like_checkpoint(path: Path) -> bool:
    if path.is_symlink():
        return False
    if path.suffix.lower() in CHECKPOINT_SUFFIXES:
        return True
    try:
        with path.open("rb") as handle:
            head = handle.read(16)
    except OSError:
        return False
    return head.startswith((b"PK\x03\x04", b"\x80\x02\x8a\x0a")) or _safetensors_header(head)


def _safetensors_header(head: bytes) -> bool:
    """safetensors: a little-endian header length, then the JSON header itself."""
    return len(head) >= 9 and head[8:9] == b"{" and 2 <= int.from_bytes(head[:8], "little") < 1 << 27


def from_environment(
    env: Mapping[str, str], folder: Path, run_dir: Path, known: set[str]
) -> StopWatch | None:
    """The watch of an observed run, or None for every other run."""
    if env.get(settings.OBSERVE) != "1":
        return None
    try:
        budget = float(env.get(settings.OBSERVE_SECONDS) or 60)
    except ValueError:
        budget = 60.0
    return StopWatch(folder, run_dir, budget, known)
