"""Who runs a run: the controller's identity (host, pid, start time) and whether that controller lives.

Job processes (an environment variable), containers (labels) and run dirs (a claim file beside them)
carry this identity, so `reprobox clean` can tell what a controller killed outright left behind from
what a live controller is still running. The start time guards against a recycled pid.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from reprobox.fileio import write_text_atomic

CONTROLLER_VARIABLE = "REPROBOX_CONTROLLER"  # in every local job process: "host pid start"
PID_LABEL = "io.reprobox.controller-pid"
HOST_LABEL = "io.reprobox.controller-host"
START_LABEL = "io.reprobox.controller-start"
CLAIMS_DIR = ".controllers"  # runs/<job>/.controllers/<run-id>.json: who runs that run dir


@dataclass(frozen=True)
class Controller:
    host: str
    pid: int
    start: str  # the process's start time in clock ticks since boot ("" where /proc cannot say)

    def encode(self) -> str:
        return f"{self.host} {self.pid} {self.start}".strip()

    def labels(self) -> dict[str, str]:
        return {HOST_LABEL: self.host, PID_LABEL: str(self.pid), START_LABEL: self.start}

    def on_this_host(self) -> bool:
        return self.host == os.uname().nodename

    def alive(self) -> bool:
        """Whether this controller still runs; one on another host counts as alive (we cannot look)."""
        if not self.on_this_host():
            return True
        return process_start(self.pid) == self.start if self.start else _pid_exists(self.pid)


def current() -> Controller:
    pid = os.getpid()
    return Controller(os.uname().nodename, pid, process_start(pid))


def decode(text: str) -> Controller | None:
    """The identity from `encode` (or labels joined the same way); None when malformed."""
    parts = text.split()
    if len(parts) not in (2, 3) or not parts[1].isdigit():
        return None
    return Controller(parts[0], int(parts[1]), parts[2] if len(parts) == 3 else "")


def from_labels(labels: dict[str, str]) -> Controller | None:
    pid = labels.get(PID_LABEL, "")
    host = labels.get(HOST_LABEL, "")
    if not host or not pid.isdigit():
        return None
    return Controller(host, int(pid), labels.get(START_LABEL, ""))


def process_start(pid: int) -> str:
    """Field 22 of /proc/PID/stat (start time in ticks); "" when the process is gone or unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else ""


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_path(run_dir: Path) -> Path:
    return run_dir.parent / CLAIMS_DIR / f"{run_dir.name}.json"


def claim(run_dir: Path) -> None:
    """Record beside the run dir (out of the job's reach) that this controller runs it."""
    me = current()
    path = claim_path(run_dir)
    with contextlib.suppress(OSError):  # atomic: a full disk leaves no claim rather than half of one
        path.parent.mkdir(exist_ok=True)
        write_text_atomic(path, json.dumps({"host": me.host, "pid": me.pid, "start": me.start}), mode=None)


def claimant(run_dir: Path) -> Controller | None:
    """The controller that claimed the run dir, or None when there is no readable claim."""
    try:
        data = json.loads(claim_path(run_dir).read_text(encoding="utf-8"))
        return Controller(str(data["host"]), int(data["pid"]), str(data.get("start", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
