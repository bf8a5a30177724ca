"""What a job's Python read of its clocks and drew from the OS's entropy, and where its memory lay: the
record that excuses a duration, a random id or an address as run-specific (``runspecific``).

Installed by the startup hook in every Python process of the job. Each clock function (``time.time``,
``perf_counter``, ``monotonic`` and their ``_ns`` forms) is wrapped: a reading is kept with its call site
(file and line), in order, so a duration (``time.time() - start``) is the difference of a reading and the
latest earlier reading of some site. A site whose call the code moves by a number written there
(``default_timer() - 0.00001``) is recorded with that constant, once, when the record is written
(``clock_offsets``): the value the script held is known, and a reading costs no more for it. Once
``datetime`` is imported, ``datetime.now``, ``utcnow`` and ``today`` are recorded the same way
(``datetime_clock``: microseconds of the epoch, two lines a site), or the record names them
``unrecorded``. Bounds, so that the hot path stays cheap and the record small:

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

from reprobox.guest import datetime_clock, settings
from reprobox.guest.clock_ids import ClockIds
from reprobox.guest.post_import import when_imported

TYPE_CHECKING = False  # imported in every process of the job at start-up: typing costs more than this
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

TIME_CLOCKS = ("time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns")
CLOCKS = (*TIME_CLOCKS, *datetime_clock.CLOCKS)
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
        self.values: list[Any] = []  # numbers; a datetime clock's datetimes until ``to_json``
        self.site_index = site_index  # shared by every clock of the process
        self.last_site: Any = None
        self.run = 0
        self.pending: Any = None
        self.skipped = 0
        self.dropped = 0

    def add(self, site: Any, value: Any) -> None:
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

    def _keep(self, site: Any, value: Any) -> None:
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
        self.originals: dict[str, Callable[[], Any]] = {}
        self.wrappers: dict[str, Callable[[], Any]] = {}
        self.unrecorded: list[str] = []  # clocks the platform did not let this process wrap
        self.draws: list[str] = []
        self.latest_draws: deque[str] = deque(maxlen=MAX_DRAWS)
        self.draws_dropped = 0
        self.clock_ids = ClockIds()

    def log(self, name: str) -> ClockLog:
        """The clock's log, made when first asked."""
        found = self.clocks.get(name)
        if found is None:
            found = self.clocks[name] = ClockLog(self.site_index)
        return found

    def wrap_clock(self, name: str, clock: Callable[[], Any]) -> Callable[[], Any]:
        add = self.log(name).add
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
        self.originals[name], self.wrappers[name] = clock, reading
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
            sites[index] = _site_name(site)
        clocks = {name: log.finish() for name, log in self.clocks.items() if log.values or log.pending}
        for name in datetime_clock.CLOCKS:
            if name in clocks:
                clocks[name] = _in_micros(clocks[name], utc=name == datetime_clock.UTC)
        return {
            "pid": os.getpid(),
            "sites": sites,
            "offsets": self.offsets() if clocks else {},
            "clocks": clocks,
            "unrecorded": self.unrecorded,
            "draws": [*self.draws, *self.latest_draws],
            "draws_dropped": self.draws_dropped,
            "clock_ids": self.clock_ids.kept(),
            "clock_ids_dropped": self.clock_ids.dropped,
            "memory": memory_ranges(),
        }

    def offsets(self) -> dict[str, int | float]:
        """The constants call sites add to their readings (``clock_offsets``); none where finding them
        fails, so that the record of the readings themselves is never lost."""
        try:
            from reprobox.guest.clock_offsets import site_offsets  # at exit: parsing is no start-up cost

            return site_offsets(self.site_index.items())
        except Exception:  # noqa: BLE001 - a source that defeats the parser leaves its sites as read
            return {}


def _site_name(site: Any) -> str:
    """``file:line`` (a datetime's site: that line's and its caller's)."""
    if site is None:
        return "<no Python frame>"
    return f"{site[0].co_filename}:{site[1]}" if len(site) == 2 else datetime_clock.site_name(site)


def _in_micros(log: dict[str, Any], *, utc: bool) -> dict[str, Any]:
    """A datetime clock's log with each reading as microseconds of the epoch (one that is none dropped)."""
    sites, values = [], []
    for site, value in zip(log["sites"], log["values"], strict=True):
        found = datetime_clock.micros(value, utc)
        if found is None:
            log["dropped"] += 1
            continue
        sites.append(site)
        values.append(found)
    return {**log, "sites": sites, "values": values}


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
    """Wrap the clocks, ``os.urandom`` and (once imported) ``uuid.uuid1`` and ``datetime``'s clocks of
    this process; write the record at exit."""
    recorder = Recorder()
    for name in TIME_CLOCKS:
        setattr(time, name, recorder.wrap_clock(name, getattr(time, name)))
    drawn = recorder.wrap_urandom(os.urandom)
    os.urandom = drawn
    random_module = sys.modules.get("random")
    if random_module is not None and hasattr(random_module, "_urandom"):  # SystemRandom, secrets
        random_module._urandom = drawn  # type: ignore[attr-defined]
    when_imported("uuid", recorder.clock_ids.wrap_module)
    if "datetime" in sys.modules:  # imported before the hook ran (a .pth file's code)
        datetime_clock.install(recorder, sys.modules["datetime"])
    else:
        when_imported("datetime", lambda module: datetime_clock.install(recorder, module))
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
