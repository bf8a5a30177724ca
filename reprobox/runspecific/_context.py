"""One run's facts as its records give them: what names the run rather than its results."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from reprobox import timestamps
from reprobox.runspecific._clockids import ClockIdRecord
from reprobox.runspecific._drawn import DrawRecord, MemoryMap
from reprobox.runspecific._durations import ClockRecord
from reprobox.runspecific._readings import ReadingRecord
from reprobox.runspecific._window import Window, window_of

_T = TypeVar("_T")
_MIN_HOSTNAME = 3  # shorter names would mask ordinary words


@dataclass(frozen=True)
class RunContext:
    """What names one run rather than its results, as its records say."""

    paths: tuple[str, ...]  # absolute paths the run owned (run dir, outputs, code snapshot, stable paths)
    run_id: str
    hostname: str | None
    name_parts: tuple[str, ...] = ()  # run-specific names in one output's path (see ``for_file``)
    window: Window | None = None  # when the run ran, as its job's clock read it
    pids: frozenset[int] = frozenset()  # the job's processes
    hostnames: tuple[str, ...] = ()  # besides ``hostname``
    clock: ClockRecord | None = field(default=None, compare=False)  # what its Python read of its clocks
    drawn: DrawRecord | None = field(default=None, compare=False)  # what it drew from the OS's entropy
    clock_ids: ClockIdRecord | None = field(default=None, compare=False)  # the uuid1s it made
    readings: ReadingRecord | None = field(default=None, compare=False)  # its monotonic clocks' readings
    memory: MemoryMap | None = field(default=None, compare=False)  # where its processes' memory lay

    @classmethod
    def from_record(cls, run_dir: str, data: Mapping[str, Any]) -> RunContext:
        """Collect the facts from a manifest's fields (any may be missing in older records)."""
        recorded = data.get("run_facts")
        facts: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {}
        found: set[str] = {run_dir, f"{run_dir}/outputs"}
        code = data.get("code") or {}
        if isinstance(code.get("snapshot"), str):
            found.add(code["snapshot"])
        found.update(_strings((data.get("runtime") or {}).get("paths") or {}))
        environment = data.get("environment") or {}
        for key in ("REPROBOX_OUTPUT_DIR", "REPROBOX_RUN_DIR", "TMPDIR"):
            if isinstance(environment.get(key), str):
                found.add(environment[key])
        found.update(_strings(facts.get("folders") or []))
        hardware = (data.get("fingerprint") or {}).get("hardware") or {}
        hostname = hardware.get("hostname") if isinstance(hardware.get("hostname"), str) else None
        hosts = tuple(sorted({h for h in _strings(facts.get("hostnames") or []) if h != hostname}))
        paths = tuple(sorted((p.rstrip("/") for p in found if p.startswith("/") and len(p) > 1), key=len))
        pids = frozenset(p for p in facts.get("pids") or [] if type(p) is int and p > 0)
        found_readings = facts.get("readings")
        readings: Mapping[str, Any] = found_readings if isinstance(found_readings, Mapping) else {}
        return cls(
            paths=paths[::-1],
            run_id=str(data.get("run_id") or ""),
            hostname=hostname,
            window=_window(data, facts),
            pids=pids,
            hostnames=hosts,
            clock=_cached(ClockRecord.from_readings, readings),
            drawn=_cached(DrawRecord.from_readings, readings),
            clock_ids=_cached(ClockIdRecord.from_readings, readings),
            readings=_cached(ReadingRecord.from_readings, readings),
            memory=_cached(MemoryMap.from_readings, readings),
        )

    def all_hostnames(self) -> list[str]:
        names = {self.hostname, *self.hostnames} - {None}
        return sorted((n for n in names if n and len(n) >= _MIN_HOSTNAME), key=len, reverse=True)


_RECORDS: dict[tuple[object, int], object] = {}


def _cached(build: Callable[[Mapping[str, Any]], _T], readings: Mapping[str, Any]) -> _T:
    """A record built once per run's readings (a comparison makes a context per file)."""
    key = (build, id(readings))
    found = _RECORDS.get(key)
    if found is None or found[0] is not readings:  # type: ignore[index]
        if len(_RECORDS) > 64:
            _RECORDS.clear()
        found = _RECORDS[key] = (readings, build(readings))
    return found[1]  # type: ignore[index,no-any-return]


def _window(data: Mapping[str, Any], facts: Mapping[str, Any]) -> Window | None:
    """The run's clock window: the guest's record of the job's clock, else the manifest's start and end."""
    found = facts.get("clock")
    clock: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    start = timestamps.parse_utc(clock.get("start")) or timestamps.parse_utc(data.get("started_at"))
    end = timestamps.parse_utc(clock.get("end")) or timestamps.parse_utc(data.get("ended_at"))
    offsets = tuple(
        o for o in clock.get("utc_offsets") or [] if isinstance(o, int) and not isinstance(o, bool)
    )
    return window_of(start, end, offsets or (0,))


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []
