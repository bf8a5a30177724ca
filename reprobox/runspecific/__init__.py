"""Which differences between two runs are run-specific, and by what evidence.

A verdict must never call runs "not reproducible" over something that names the run rather than what it
computed, and must never excuse a value because it merely looks like such a thing. The evidence is what
the guest recorded of each run (``RunContext``): its wall-clock window and the UTC offsets in force, its
host names, the pids of the job's processes, its run id and folders.

- by value: two strings that become equal once each is masked with its own run's facts: its folders and
  run id, its host names and pids, any reading of its clock inside its window (``_clock``: digits in any
  layout, tested against the window), memory addresses in reprs (``<... at 0x7f3a...>``), and the names of
  its run-specific folders (``_pairing``). Numbers that are Unix time inside each run's window likewise.
- by name: scalars whose tag names a duration or a rate (``train_runtime``, ``charts/SPS``, ``time/fps``,
  a monitor's ``t``: ``_names``). Tensors and computed metrics are never excused by name.

Output files are paired by their names masked the same way, then by structure (``pair_by_structure``):
folders whose names differ while what lies under them pairs file for file.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from reprobox import timestamps
from reprobox.runspecific._clock import Window, is_reading, mask_clock, window_of
from reprobox.runspecific._names import (
    DURATION,
    HOSTNAME,
    PROCESS_ID,
    TIMESTAMP,
    reason_by_key,
    tag_of,
)
from reprobox.runspecific._pairing import FolderPair, StructuralPairs, pair_by_structure

__all__ = [
    "CLOCK_MARK",
    "CONCURRENT_LINES",
    "DURATION",
    "HOSTNAME",
    "MEMORY_ADDRESS",
    "NAME_PART",
    "PAIRED_FOLDER",
    "PROCESS_ID",
    "RUN_DIRECTORY",
    "TIMESTAMP",
    "Excuse",
    "FolderPair",
    "RunContext",
    "StructuralPairs",
    "Window",
    "classify_value",
    "for_file",
    "judge_value",
    "last_key",
    "mask",
    "mask_file_name",
    "masked_name",
    "pair_by_structure",
    "reason_by_key",
]

RUN_DIRECTORY = "a path under the run's own directory"
NAME_PART = "a run id or time in the file's own path"
MEMORY_ADDRESS = "a memory address"
PAIRED_FOLDER = "a run-specific folder name (what lies under it pairs file for file)"
CONCURRENT_LINES = "log lines of concurrent writers in another order, each stamped by the run's clock"
CLOCK_MARK = "<time>"
BY_NAME = "its name"
BY_RECORD = "the run's own record"
_MIN_HOSTNAME = 3  # shorter names would mask ordinary words
MIN_PID = 100
"""Smaller pids (a container's first processes) read like ordinary numbers (an epoch, a count): they are
masked only where they name a process (``pid=7``, ``MainThread:7``, a TensorBoard name's ``<host>.7``)."""
_PID_CONTEXT = r"(?:(?<![A-Za-z])pid\W{0,2}|Thread[-:]|Process[-:]|<host>\.)"
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]{4,16}\b")


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
        return cls(
            paths=paths[::-1],
            run_id=str(data.get("run_id") or ""),
            hostname=hostname,
            window=_window(data, facts),
            pids=pids,
            hostnames=hosts,
        )

    def all_hostnames(self) -> list[str]:
        names = {self.hostname, *self.hostnames} - {None}
        return sorted((n for n in names if n and len(n) >= _MIN_HOSTNAME), key=len, reverse=True)


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


def mask(text: str, run: RunContext) -> tuple[str, set[str]]:
    """The text with the run's own paths, id, hosts, pids, clock readings, memory addresses and
    run-specific names replaced, and why."""
    reasons: set[str] = set()
    text, count = _ADDRESS.subn("at <address>", text)  # first: its hex digits hold no other fact
    if count:
        reasons.add(MEMORY_ADDRESS)
    for path in run.paths:  # longest first: the outputs folder before the run folder that holds it
        if path in text:
            text, reasons = text.replace(path, "<run>"), reasons | {RUN_DIRECTORY}
    if run.run_id and run.run_id in text:
        text, reasons = text.replace(run.run_id, "<run-id>"), reasons | {RUN_DIRECTORY}
    for part in run.name_parts:  # a folder's own name before the clock: it is why the file was paired
        if part in text:
            text, reasons = text.replace(part, "<name>"), reasons | {NAME_PART}
    hosts = _host_pattern(tuple(run.all_hostnames()))
    if hosts is not None:
        text, count = hosts.subn("<host>", text)
        if count:
            reasons.add(HOSTNAME)
    if run.window is not None:
        text, readings = mask_clock(text, run.window)
        if readings:
            reasons.add(TIMESTAMP)
    if run.pids and _DIGIT.search(text):
        text, count = _pid_pattern(run.pids).subn(_pid_mark, text)
        if count:
            reasons.add(PROCESS_ID)
    return text, reasons


_DIGIT = re.compile(r"\d")


@lru_cache(maxsize=256)
def _host_pattern(hosts: tuple[str, ...]) -> re.Pattern[str] | None:
    if not hosts:
        return None
    return re.compile("(?<![A-Za-z0-9])(?:" + "|".join(map(re.escape, hosts)) + ")(?![A-Za-z0-9])")


@lru_cache(maxsize=256)
def _pid_pattern(pids: frozenset[int]) -> re.Pattern[str]:
    """A pid of the run as a number of its own (``MainThread:2264``, ``.2264.0``), never inside another
    number or a decimal fraction; a small one only where it names a process."""
    large = "|".join(str(p) for p in sorted(pids, reverse=True) if p >= MIN_PID)
    small = "|".join(str(p) for p in sorted(pids, reverse=True) if p < MIN_PID)
    choices = [rf"(?<!\d)(?<!\d\.)(?:{large})(?!\d)"] if large else []
    choices += [rf"(?P<context>{_PID_CONTEXT})(?:{small})(?!\d)"] if small else []
    return re.compile("|".join(choices))


def _pid_mark(match: re.Match[str]) -> str:
    return (match.group("context") or "") + "<pid>" if "context" in match.re.groupindex else "<pid>"


def last_key(name: str) -> str:
    """The writer's own name of a dotted value name (``log_history.3.train_runtime`` -> ``train_runtime``,
    ``charts/SPS.step_1024`` -> ``charts/SPS``)."""
    return tag_of(name)


@dataclass(frozen=True)
class Excuse:
    """Why a differing value is run-specific, and what proves it (its name, or the run's own record)."""

    reason: str
    evidence: str


def _scalar(value: object) -> bool:
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def judge_value(
    name: str, a: object, b: object, run_a: RunContext, run_b: RunContext, *, names: Collection[str] = ()
) -> Excuse | None:
    """Why two differing values are run-specific, or None for a real difference."""
    if _scalar(a) and _scalar(b):
        by_key = reason_by_key(name, names)
        unrecorded = {  # older records hold no such facts: their names are all there is to go by
            HOSTNAME: not (run_a.all_hostnames() or run_b.all_hostnames()),
            PROCESS_ID: not (run_a.pids or run_b.pids),
        }
        if by_key == DURATION or (by_key is not None and unrecorded.get(by_key)):
            return Excuse(by_key, BY_NAME)
    if _number(a) and _number(b) and _reads_clock(a, run_a) and _reads_clock(b, run_b):
        return Excuse(TIMESTAMP, BY_RECORD)
    named_pid = reason_by_key(name, names) == PROCESS_ID
    if _pid_pair(a, b, run_a, run_b) and (named_pid or min(a, b) >= MIN_PID):  # type: ignore[call-overload]
        return Excuse(PROCESS_ID, BY_RECORD)
    masked_a, reasons_a = _masked_value(a, run_a)
    masked_b, reasons_b = _masked_value(b, run_b)
    if masked_a == masked_b and (reasons_a or reasons_b):
        return Excuse(" and ".join(sorted(reasons_a | reasons_b)), BY_RECORD)
    return None


def _pid_pair(a: object, b: object, run_a: RunContext, run_b: RunContext) -> bool:
    """Two whole numbers, each a pid its own run recorded."""
    return type(a) is int and type(b) is int and a in run_a.pids and b in run_b.pids


def classify_value(
    name: str, a: object, b: object, run_a: RunContext, run_b: RunContext, *, names: Collection[str] = ()
) -> str | None:
    """Why two differing values are run-specific ("a wall-clock timestamp"), or None for a real difference."""
    excuse = judge_value(name, a, b, run_a, run_b, names=names)
    return excuse.reason if excuse else None


def _reads_clock(value: object, run: RunContext) -> bool:
    return _number(value) and run.window is not None and is_reading(value, run.window)  # type: ignore[arg-type]


def _masked_value(value: object, run: RunContext) -> tuple[object, set[str]]:
    """Strings masked anywhere inside lists and mappings (a saved argv, a config dict held as one value);
    numbers that are Unix time inside the run's window too."""
    if isinstance(value, str):
        return mask(value, run)
    if _reads_clock(value, run):
        return "<time>", {TIMESTAMP}
    if isinstance(value, list | tuple):
        items = [_masked_value(v, run) for v in value]
        return [m for m, _ in items], set().union(*(r for _, r in items)) if items else set()
    if isinstance(value, Mapping):
        pairs = {str(k): _masked_value(v, run) for k, v in value.items()}
        reasons: set[str] = set()
        for _, r in pairs.values():
            reasons |= r
        return {k: m for k, (m, _) in pairs.items()}, reasons
    return value, set()


def masked_name(name: str, run: RunContext) -> str:
    """A tensor, value or file name with the run's own paths, id, hosts, pids and clock masked."""
    return mask(name, run)[0]


def mask_file_name(path: str, run: RunContext) -> tuple[str, set[str]]:
    """An output's path with what names the run masked (its paths, hosts, pids, clock readings), and why.
    Files are paired by it; their contents are still compared, so a pairing never excuses a difference
    inside. A small pid of the run (a container's job is pid 7 or 8) is masked as a whole component of
    the file's own name too (``events.out.tfevents.<time>.host.8.0``): only the run's recorded pids, and
    only where no exact name paired the file first."""
    masked, reasons = mask(path, run)
    small = sorted((p for p in run.pids if p < MIN_PID), reverse=True)
    if small:
        folder, _, name = masked.rpartition("/")
        pattern = rf"(?<=[._-])(?:{'|'.join(map(str, small))})(?=[._-]|$)"
        name, count = re.subn(pattern, "<pid>", name)
        if count:
            masked, reasons = (f"{folder}/{name}" if folder else name), reasons | {PROCESS_ID}
    return masked, reasons


def for_file(run: RunContext, path: str, parts: tuple[str, ...] = ()) -> RunContext:
    """The run's context for the values of one output file: the run-specific parts of its path (the
    clock readings in it, the names of the run-specific folders it lies under) are the run's own names
    inside it too."""
    found = set(parts)
    if run.window is not None:
        found.update(r for r in mask_clock(path, run.window)[1] if len(r) >= 6)
    return replace(run, name_parts=tuple(sorted(found, key=len, reverse=True)))
