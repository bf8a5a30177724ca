"""The job's processes' records of their clock readings, entropy draws and memory maps, merged into the
run's facts (``runfacts``) within bounds: at most ``MAX_PROCESSES`` files of ``MAX_FILE_BYTES`` each, and
``MAX_READINGS`` readings, ``MAX_DRAWS`` draws, ``MAX_CLOCK_IDS`` clock-derived uuids and ``MAX_RANGES``
address ranges in all. What lies past a bound is counted as dropped, so the verdict knows the record is
incomplete and judges nothing by it alone (a uuid past its bound leaves the clock's record whole: it is
counted as ``clock_ids_dropped``). A clock some process could not wrap (``datetime``'s, where the
platform refuses) is named in ``unrecorded_clocks``, which leaves the record incomplete too.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reprobox import saferead
from reprobox.guest import datetime_clock, readings

MAX_PROCESSES = 64
MAX_FILE_BYTES = 4 * saferead.MIB
MAX_READINGS = 32768
MAX_DRAWS = 8192
MAX_RANGES = 16384
MAX_CLOCK_IDS = 4096
PYTHONS = (
    "python",
    "pypy",
)  # a Python process without a record ended without atexit: its clocks were wrapped
SHELLS = frozenset(
    {"bash", "sh", "dash", "zsh", "ksh", "fish", "env", "timeout", "nohup", "nice", "stdbuf", "tini"}
)
UNRECORDABLE = frozenset({datetime_clock.UNWRAPPED})
_HEX = re.compile(r"[0-9a-f]{2,128}")
_UUID_HEX = re.compile(r"[0-9a-f]{32}")


def merged(folder: Path, programs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{clocks: [{pid, clock, site_names, site_offsets, sites, values, skipped, dropped}], draws,
    clock_ids, memory, dropped}``: the readings of each process and clock in order, each site an index into
    ``site_names`` (``file:line``), ``site_offsets`` the constants the code adds to some sites' readings
    (site index as a string -> number); ``clock_ids`` the uuid1s the job made (32 hex digits);
    ``dropped`` counts what no bound kept; ``programs`` are the job's long-lived processes (pid ->
    executable) and ``unrecorded_programs`` those of them, shells aside, that left no record, whose
    clocks no record holds; ``unrecorded_clocks`` the clocks some process read unrecorded."""
    files = sorted(folder.glob(f"{readings.FILE_PREFIX}*.json")) if folder.is_dir() else []
    clocks: list[dict[str, Any]] = []
    draws: list[str] = []
    clock_ids: list[str] = []
    clock_ids_dropped = 0
    memory: list[list[int]] = []
    unrecorded_clocks: set[str] = set()
    dropped = max(0, len(files) - MAX_PROCESSES)
    written: set[int] = set()
    kept = 0
    for path in files[:MAX_PROCESSES]:
        data: Any = None
        with contextlib.suppress(OSError, saferead.UnsafeFile):
            data = saferead.read_json(path, MAX_FILE_BYTES, root=folder)
        if not isinstance(data, dict):
            dropped += 1
            continue
        written.add(_int(data.get("pid")))
        for entry in _clocks(data):
            room = max(0, MAX_READINGS - kept)
            entry["dropped"] += max(0, len(entry["values"]) - room)
            entry["sites"], entry["values"] = entry["sites"][:room], entry["values"][:room]
            kept += len(entry["values"])
            dropped += entry["dropped"]
            clocks.append(entry)
        found = [d for d in data.get("draws") or [] if isinstance(d, str) and _HEX.fullmatch(d)]
        dropped += _int(data.get("draws_dropped")) + max(0, len(draws) + len(found) - MAX_DRAWS)
        draws += found[: max(0, MAX_DRAWS - len(draws))]
        made = [u for u in data.get("clock_ids") or [] if isinstance(u, str) and _UUID_HEX.fullmatch(u)]
        room = max(0, MAX_CLOCK_IDS - len(clock_ids))
        clock_ids_dropped += _int(data.get("clock_ids_dropped")) + max(0, len(made) - room)
        clock_ids += made[:room]
        found_unrecorded = data.get("unrecorded")
        unrecorded_clocks.update(
            c for c in (found_unrecorded if isinstance(found_unrecorded, list) else []) if c in UNRECORDABLE
        )
        memory += [r for r in data.get("memory") or [] if _range(r)][: max(0, MAX_RANGES - len(memory))]
    recorded = {entry["pid"] for entry in clocks} | written
    return {
        "clocks": clocks,
        "draws": sorted(set(draws)),
        "clock_ids": sorted(set(clock_ids)),
        "clock_ids_dropped": clock_ids_dropped,
        "memory": _merge(memory),
        "dropped": dropped,
        "programs": dict(programs or {}),
        "unrecorded_programs": unrecorded(programs or {}, recorded),
        "unrecorded_clocks": sorted(unrecorded_clocks),
    }


def unrecorded(programs: Mapping[str, Any], recorded: set[int]) -> list[str]:
    """The programs of the job that may have read clocks no record holds: each process a Python process
    of the job started that left no record (a service in Go, a C++ binary, a Python process killed by a
    signal or ended by ``os._exit``). A shell's helpers (pyenv's shims) take no part."""
    found = set()
    for pid, seen in programs.items():
        if not (pid.isdigit() and isinstance(seen, Mapping)) or int(pid) in recorded:
            continue
        program, parent = seen.get("program"), seen.get("parent")
        if isinstance(program, str) and program and str(parent).startswith(PYTHONS):
            found.add(program)
    return sorted(found)


def _clocks(data: dict[str, Any]) -> list[dict[str, Any]]:
    pid = _int(data.get("pid"))
    sites = [s if isinstance(s, str) else "" for s in data.get("sites") or []]
    offsets = _offsets(data.get("offsets"), len(sites))
    found = []
    for clock, log in sorted((data.get("clocks") or {}).items()):
        if clock not in readings.CLOCKS or not isinstance(log, dict):
            continue
        pairs = [
            (s, v)
            for s, v in zip(log.get("sites") or [], log.get("values") or [], strict=False)
            if type(s) is int and 0 <= s < len(sites) and _number(v)
        ]
        found.append(
            {
                "pid": pid,
                "clock": clock,
                "site_names": sites,
                "site_offsets": offsets,
                "sites": [s for s, _ in pairs],
                "values": [v for _, v in pairs],
                "skipped": _int(log.get("skipped")),
                "dropped": _int(log.get("dropped")),
            }
        )
    return found


def _offsets(found: object, sites: int) -> dict[str, int | float]:
    """Site index -> the constant its code adds to its readings (``clock_offsets``), finite numbers only."""
    if not isinstance(found, dict):
        return {}
    return {
        key: value
        for key, value in found.items()
        if isinstance(key, str)
        and key.isdigit()
        and int(key) < sites
        and _number(value)
        and math.isfinite(value)
    }


def _merge(ranges: list[list[int]]) -> list[list[int]]:
    merged_ranges: list[list[int]] = []
    for start, end in sorted(ranges):
        if merged_ranges and start <= merged_ranges[-1][1]:
            merged_ranges[-1][1] = max(merged_ranges[-1][1], end)
        else:
            merged_ranges.append([start, end])
    return merged_ranges


def _range(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(type(v) is int for v in value)
        and 0 <= value[0] < value[1]
    )


def _number(value: object) -> bool:
    return type(value) in (int, float)


def _int(value: object) -> int:
    return value if type(value) is int and value >= 0 else 0
