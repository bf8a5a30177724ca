"""What a job's Python read of its clocks and drew from the OS's entropy, and where its memory lay: the
record that excuses a duration, a random id or an address as run-specific (``runspecific``).

Installed by the startup hook in every Python process of the job. Each clock function (``time.time``,
``perf_counter``, ``monotonic`` and their ``_ns`` forms) is wrapped: a reading is kept with its call site
(file and line), in order, so a duration (``time.time() - start``) is the difference of a reading and the
latest earlier reading of some site. Bounds, so that the hot path stays cheap and the record small:

- after ``SAME_SITE_RUN`` readings in a row at one site (a progress bar's loop) only the last of the run
  is kept (it is the one a later reading is measured from); the readings skipped are counted;
- at most ``MAX_READINGS`` readings per clock and ``MAX_SITES`` sites per process; past them nothing more
  is kept and the record says it is incomplete (``dropped``), so no value is judged by it alone.

``os.urandom`` (and so ``uuid.uuid4``, ``secrets``, ``random.SystemRandom``) is wrapped the same way: the
first ``MAX_DRAWS`` draws and the latest ``MAX_DRAWS`` (ids are named at a job's start or end), up to
``MAX_DRAW_BYTES`` each; an id drawn between them is not recognised and stays a difference. Each
``uuid.uuid1`` the job makes is kept as it returned (``clock_ids``: the C library reads the clock it is
cut from, no wrapper of ``time`` sees that reading). At exit
the address ranges of the process's memory map (``/proc/self/maps``, at most ``MAX_RANGES``) are added,
and the whole written to ``<run dir>/.reprobox/readings-<pid>.json`` for the entrypoint to merge into the
run's facts. A process that ends without running ``atexit`` (``os._exit``, a forked worker) records
nothing.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from collections import deque

from reprobox.guest import settings
from reprobox.guest.clock_ids import ClockIds
from reprobox.guest.post_import import when_imported

TYPE_CHECKING = False  # imported in every process of the job at start-up: typing costs more than this
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

CLOCKS = ("time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns")
SAME_SITE_RUN = 64
MAX_READINGS = 8192
MAX_SITES = 256
MAX_DRAWS = 1024
MAX_DRAW_BYTES = 64
MAX_RANGES = 4096
FILE_PREFIX = "readings-"


class ClockLog:
    """One clock's readings in order: ``sites[i]`` read ``values[i]``."""

    __slots__ = ("dropped", "last_site", "pending", "run", "site_index", "sites", "skipped", "values")

    def __init__(self, site_index: dict[Any, int]) -> None:
        self.sites: list[int] = []
        self.values: list[float | int] = []
        self.site_index = site_index  # shared by every clock of the process
        self.last_site: Any = None
        self.run = 0
        self.pending: float | int | None = None
        self.skipped = 0
        self.dropped = 0

    def add(self, site: Any, value: float | int) -> None:
        if site == self.last_site:
            self.run += 1
            if self.run > SAME_SITE_RUN:  # a loop at one site: keep the latest, keep nothing else
                self.pending = value
                self.skipped += 1
                return
        else:
            if self.pending is not None:  # the loop's last reading: kept after all
                self._keep(self.last_site, self.pending)
                self.pending = None
                self.skipped -= 1
            self.last_site, self.run = site, 1
        self._keep(site, value)

    def _keep(self, site: Any, value: float | int) -> None:
        index = self.site_index.get(site)
        if index is None:
            if len(self.site_index) >= MAX_SITES:
                self.dropped += 1
                return
            index = self.site_index[site] = len(self.site_index)
        if len(self.values) >= MAX_READINGS:
            self.dropped += 1
            return
        self.sites.append(index)
        self.values.append(value)

    def finish(self) -> dict[str, Any]:
        if self.pending is not None:
            self._keep(self.last_site, self.pending)
            self.pending = None
            self.skipped -= 1
        return {"sites": self.sites, "values": self.values, "skipped": self.skipped, "dropped": self.dropped}


class Recorder:
    """The readings, draws and memory map of this process."""

    def __init__(self) -> None:
        self.site_index: dict[Any, int] = {}
        self.clocks: dict[str, ClockLog] = {}
        self.draws: list[str] = []
        self.latest_draws: deque[str] = deque(maxlen=MAX_DRAWS)
        self.draws_dropped = 0
        self.clock_ids = ClockIds()

    def wrap_clock(self, name: str, clock: Callable[[], Any]) -> Callable[[], Any]:
        log = self.clocks[name] = ClockLog(self.site_index)
        add = log.add
        frame = sys._getframe

        def reading() -> Any:
            value = clock()
            try:
                caller = frame(1)
            except ValueError:  # called with no Python frame above (from C, at a thread's top)
                add(None, value)
                return value
            add((caller.f_code, caller.f_lineno), value)
            return value

        reading.__name__ = reading.__qualname__ = name
        reading.__module__ = "time"  # pickled by reference, it is found where the job looks for it
        reading.__doc__ = clock.__doc__
        return reading

    def wrap_urandom(self, urandom: Callable[[int], bytes]) -> Callable[[int], bytes]:
        draws, latest = self.draws, self.latest_draws

        def drawn(size: int) -> bytes:
            value = urandom(size)
            if len(draws) < MAX_DRAWS:
                draws.append(value[:MAX_DRAW_BYTES].hex())
            else:  # past the bound: the latest are kept (ids named at the end), the rest counted
                if len(latest) == MAX_DRAWS:
                    self.draws_dropped += 1
                latest.append(value[:MAX_DRAW_BYTES].hex())
            return value

        drawn.__name__ = drawn.__qualname__ = "urandom"
        drawn.__module__ = "os"
        drawn.__doc__ = urandom.__doc__
        return drawn

    def to_json(self) -> dict[str, Any]:
        sites = [""] * len(self.site_index)
        for site, index in self.site_index.items():
            sites[index] = f"{site[0].co_filename}:{site[1]}" if site is not None else "<no Python frame>"
        return {
            "pid": os.getpid(),
            "sites": sites,
            "clocks": {name: log.finish() for name, log in self.clocks.items() if log.values or log.pending},
            "draws": [*self.draws, *self.latest_draws],
            "draws_dropped": self.draws_dropped,
            "clock_ids": self.clock_ids.kept(),
            "clock_ids_dropped": self.clock_ids.dropped,
            "memory": memory_ranges(),
        }


def memory_ranges(maps: str = "/proc/self/maps") -> list[list[int]]:
    """The process's mapped address ranges, ``[start, end)``, adjacent ones merged (at most MAX_RANGES)."""
    try:
        with open(maps, encoding="ascii", errors="replace") as handle:  # noqa: PTH123 - no pathlib at start-up
            lines = handle.read(1 << 20).splitlines()
    except OSError:
        return []
    ranges: list[list[int]] = []
    for line in lines:
        low, _, high = line.partition(" ")[0].partition("-")
        try:
            start, end = int(low, 16), int(high, 16)
        except ValueError:
            continue
        if ranges and start <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], end)
        elif len(ranges) < MAX_RANGES:
            ranges.append([start, end])
    return ranges


def install(run_dir: str) -> Recorder:
    """Wrap the clocks, ``os.urandom`` and (once imported) ``uuid.uuid1`` of this process; write the
    record at exit."""
    recorder = Recorder()
    for name in CLOCKS:
        setattr(time, name, recorder.wrap_clock(name, getattr(time, name)))
    drawn = recorder.wrap_urandom(os.urandom)
    os.urandom = drawn
    random_module = sys.modules.get("random")
    if random_module is not None and hasattr(random_module, "_urandom"):  # SystemRandom, secrets
        random_module._urandom = drawn  # type: ignore[attr-defined]
    when_imported("uuid", recorder.clock_ids.wrap_module)
    atexit.register(_write, recorder, os.path.join(run_dir, settings.GUEST_STATE))  # noqa: PTH118
    return recorder


def _write(recorder: Recorder, folder: str) -> None:
    import json

    try:
        os.makedirs(folder, exist_ok=True)  # noqa: PTH103
        path = os.path.join(folder, f"{FILE_PREFIX}{os.getpid()}.json")  # noqa: PTH118
        with open(path, "w", encoding="utf-8") as handle:  # noqa: PTH123
            json.dump(recorder.to_json(), handle, separators=(",", ":"))
    except (OSError, ValueError):
        pass
