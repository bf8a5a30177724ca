"""Importing what hashing a run's outputs needs (torch takes seconds) while the job runs.

The guest's own process only waits while the job runs; once the job ends, the run's result waits on
the hashing, and hashing a torch checkpoint starts with `import torch`. Importing it in a thread of
the waiting process takes that out of every run's time. It is left out under a memory limit (a
container's, a Slurm job's): torch's modules hold about 150 MB that the job may need.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

CGROUPS = Path("/sys/fs/cgroup")
OWN_CGROUPS = Path("/proc/self/cgroup")
UNLIMITED = 1 << 62  # cgroup v1 writes "no limit" as a number near 2**63


class WarmUp:
    """One import thread, started with the job, waited for before the hashing imports anything.

    It starts importing once the job has run for `DELAY_SECONDS`: a job that ends sooner (a script that
    trains nothing) is not kept waiting for an import its outputs may not need."""

    DELAY_SECONDS = 1.0

    def __init__(self) -> None:
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reprobox-warm-up", daemon=True)

    def start(self) -> None:
        if not memory_limited():
            self._thread.start()

    def finish(self) -> None:
        """Wait for an import under way: two threads importing torch and numpy at once may deadlock."""
        self._ended.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        if not self._ended.wait(self.DELAY_SECONDS):
            _import_hashing()


def _import_hashing() -> None:
    with contextlib.suppress(Exception):  # hashing imports again, and reports what fails then
        import torch  # noqa: F401

        from reprobox.guest import hashing  # noqa: F401


def memory_limited(cgroups: Path = CGROUPS, own: Path = OWN_CGROUPS) -> bool:
    """Whether a cgroup of this process, or one above it, limits its memory (cgroup v2 or v1)."""
    try:
        lines = own.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    # the roots too: inside a container on cgroup v1 its own cgroup is mounted there
    files = {cgroups / "memory.max", cgroups / "memory" / "memory.limit_in_bytes"}
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _number, controllers, path = parts
        relative = path.strip("/")
        if controllers == "":  # v2: one hierarchy, memory.max at each level
            files.update(folder / "memory.max" for folder in _up_to(cgroups / relative, cgroups))
        elif "memory" in controllers.split(","):
            mount = cgroups / "memory"
            files.update(f / "memory.limit_in_bytes" for f in _up_to(mount / relative, mount))
    return any(_limit(path) < UNLIMITED for path in files)


def _up_to(folder: Path, top: Path) -> list[Path]:
    """`folder` and the folders above it, up to and including `top`."""
    found = [folder]
    while found[-1] != top and top in found[-1].parents:
        found.append(found[-1].parent)
    return found


def _limit(path: Path) -> int:
    try:
        value = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return UNLIMITED
    return int(value) if value.isdigit() else UNLIMITED  # "max": none
