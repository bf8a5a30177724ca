"""A text with one run's own facts masked: its paths, run id, names, hosts, clock readings, pids, the
addresses it mapped, the ids it drew and the uuid1s it made, each replaced by a mark, with why."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache

from reprobox.runspecific._clock import mask_clock
from reprobox.runspecific._clockids import CLOCK_ID, mask_clock_ids
from reprobox.runspecific._context import RunContext
from reprobox.runspecific._drawn import RANDOM_ID, mask_addresses, mask_drawn
from reprobox.runspecific._durations import decimals, mask_durations
from reprobox.runspecific._names import HOSTNAME, PROCESS_ID, TIMESTAMP
from reprobox.runspecific._readings import CLOCK_READING, mask_readings

RUN_DIRECTORY = "a path under the run's own directory"
NAME_PART = "a run id or time in the file's own path"
MEMORY_ADDRESS = "a memory address inside the run's memory map"
ADDRESS_BY_LOOK = "a memory address (by its look: the run recorded no memory map)"
MIN_PID = 100
"""Smaller pids (a container's first processes) read like ordinary numbers (an epoch, a count): they are
masked only where they name a process (``pid=7``, ``MainThread:7``, a TensorBoard name's ``<host>.7``)."""
_PID_CONTEXT = r"(?:(?<![A-Za-z])pid\W{0,2}|Thread[-:]|Process[-:]|<host>\.)"
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]{4,16}\b")


def mask(text: str, run: RunContext) -> tuple[str, set[str]]:
    """The text with the run's own paths, id, hosts, pids, clock readings and durations, memory
    addresses, the ids it drew, the uuid1s it made and its run-specific names replaced, and why."""
    reasons: set[str] = set()
    text = _mask_facts(text, run, reasons)
    return _mask_numbers(text, run, reasons, frozenset()), reasons


def mask_pair(
    text_a: str, text_b: str, run_a: RunContext, run_b: RunContext, *, durations: bool = True
) -> tuple[tuple[str, set[str]], tuple[str, set[str]]]:
    """Both texts masked, each with its own run's facts, where a decimal that stands at the same place in
    both with the same digits is left as it is: a number equal in both runs is no duration of either
    (``train_loss 0.049640`` is not masked in one run because its digits met a difference of that run's
    readings, and kept in the other). ``durations=False`` leaves every decimal that is no other fact, for
    a caller that judges them with their names (a line of prose)."""
    reasons_a: set[str] = set()
    reasons_b: set[str] = set()
    text_a, text_b = _mask_facts(text_a, run_a, reasons_a), _mask_facts(text_b, run_b, reasons_b)
    numbers_a, numbers_b = decimals(text_a), decimals(text_b)
    same: frozenset[int] = frozenset()
    if not durations:  # every decimal kept, as if equal in both
        same = frozenset(range(max(len(numbers_a), len(numbers_b))))
    elif len(numbers_a) == len(numbers_b):
        same = frozenset(
            place for place, (x, y) in enumerate(zip(numbers_a, numbers_b, strict=True)) if x == y
        )
    return (
        (_mask_numbers(text_a, run_a, reasons_a, same), reasons_a),
        (_mask_numbers(text_b, run_b, reasons_b, same), reasons_b),
    )


def _mask_facts(text: str, run: RunContext, reasons: set[str]) -> str:
    """The run's addresses in reprs, names, drawn ids, uuid1s, clock readings and monotonic readings."""
    if run.memory is None:  # an older record: an address in a repr is known by its look alone
        text, count = _ADDRESS.subn("at <address>", text)  # first: its hex digits hold no other fact
        reasons |= {ADDRESS_BY_LOOK} if count else set()
    else:
        text, count = mask_addresses(text, run.memory, "<address>", decimal=False)
        reasons |= {MEMORY_ADDRESS} if count else set()
    text = _mask_names(text, run, reasons)
    if run.drawn is not None:
        text, count = mask_drawn(text, run.drawn)
        reasons |= {RANDOM_ID} if count else set()
    if run.clock_ids is not None:  # before the clock: a uuid1's first digits may read as a date
        text, count = mask_clock_ids(text, run.clock_ids)
        reasons |= {CLOCK_ID} if count else set()
    if run.window is not None:
        text, readings = mask_clock(text, run.window)
        reasons |= {TIMESTAMP} if readings else set()
    if run.readings is not None and "." in text:  # a monotonic clock's reading, saved whole
        text, count = mask_readings(text, run.readings)
        reasons |= {CLOCK_READING} if count else set()
    return text


def _mask_numbers(text: str, run: RunContext, reasons: set[str], keep: frozenset[int]) -> str:
    """Durations (but the decimals at the places ``keep`` names), decimal addresses and pids."""
    if run.clock is not None and "." in text:  # after the clock: a Unix time is no duration
        text, kinds = mask_durations(text, run.clock, keep=keep)
        reasons |= kinds
    if run.memory is not None and _DIGIT.search(text):  # after the clock: a Unix time is no address
        text, count = mask_addresses(text, run.memory, "<address>", decimal=True)
        reasons |= {MEMORY_ADDRESS} if count else set()
    if run.pids and _DIGIT.search(text):
        text, count = _pid_pattern(run.pids).subn(_pid_mark, text)
        reasons |= {PROCESS_ID} if count else set()
    return text


def _mask_names(text: str, run: RunContext, reasons: set[str]) -> str:
    """The run's paths, run id, the run-specific names in the file's path and its hosts (``reasons``
    gains why)."""
    for path in run.paths:  # longest first: the outputs folder before the run folder that holds it
        if path in text:
            text = text.replace(path, "<run>")
            reasons.add(RUN_DIRECTORY)
    if run.run_id and run.run_id in text:
        text = text.replace(run.run_id, "<run-id>")
        reasons.add(RUN_DIRECTORY)
    for part in run.name_parts:  # a folder's own name before the clock: it is why the file was paired
        if part in text:
            text = text.replace(part, "<name>")
            reasons.add(NAME_PART)
    hosts = _host_pattern(tuple(run.all_hostnames()))
    if hosts is not None:
        text, count = hosts.subn("<host>", text)
        reasons |= {HOSTNAME} if count else set()
    return text


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
