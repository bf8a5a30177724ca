"""Which differences between two runs are run-specific, and by what evidence.

A verdict must never call runs "not reproducible" over something that names the run rather than what it
computed, and must never excuse a value because it merely looks like such a thing. The evidence is what
the guest recorded of each run (``RunContext``): its wall-clock window and the UTC offsets in force, its
host names, the pids of the job's processes, its run id and folders, and what its Python read of its
clocks, drew from the OS's entropy and mapped in memory.

- by value: two strings that become equal once each is masked with its own run's facts: its folders and
  run id, its host names and pids, any reading of its clock inside its window (``_clock``: digits in any
  layout, tested against the window), addresses inside its processes' memory map (``<... at 0x7f3a...>``,
  a decimal ``id()``), readings of its monotonic clocks saved whole (``_readings``), ids written from
  what it drew from the OS's entropy (``_drawn``) or cut from the uuid1s it made (``_clockids``), and the
  names of its run-specific folders (``_pairing``). Numbers that are Unix time inside each run's window,
  or one of its monotonic clocks' readings, likewise.
- by the record of its clocks: numbers that are a difference of two readings its Python took of
  ``time``'s clocks or through ``datetime.now`` (a duration), a whole count over one (a rate) or one
  over a whole count (a mean), to the digits they show and where that is no chance (``_durations``),
  or the mean, sum or spread of durations it measured in a row at one place, likewise (``_series``),
  whatever they are named, or, too coarse for each run alone, the same such figure measured at the same
  place in the code in both (``_paired``); an array inside a checkpoint element by element
  (``judge_elements``). A reading is taken as the script held it: plus the constant its line adds to it
  (``default_timer() - 0.00001``), as the guest recorded.
- by name, as a fallback only: scalars whose tag names a duration or a rate (``train_runtime``,
  ``charts/SPS``, a monitor's ``t``: ``_names``) where the run kept no complete record of its clocks to
  test them (an older record, a bound reached, a program its Python started that kept none) or they are
  too coarse for the record to test, and the verdict says so. Tensors and computed metrics are never
  excused by name.

Output files are paired by their names masked the same way, then by structure (``pair_by_structure``):
folders whose names differ while what lies under them pairs file for file.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from reprobox.runspecific._clockids import CLOCK_ID
from reprobox.runspecific._context import RunContext
from reprobox.runspecific._drawn import MIN_DECIMAL_ADDRESS, RANDOM_ID
from reprobox.runspecific._durations import (
    DURATION_OF_CLOCK,
    MEAN_OF_CLOCK,
    RATE_OF_CLOCK,
    UNTESTABLE,
    count_in,
    explains,
)
from reprobox.runspecific._mask import (
    ADDRESS_BY_LOOK,
    MEMORY_ADDRESS,
    MIN_PID,
    NAME_PART,
    RUN_DIRECTORY,
    for_file,
    mask,
    mask_file_name,
    mask_pair,
    masked_name,
)
from reprobox.runspecific._names import (
    DURATION,
    HOSTNAME,
    PROCESS_ID,
    TIMESTAMP,
    names_computed,
    names_rate,
    reason_by_key,
    tag_of,
)
from reprobox.runspecific._paired import explains_pair
from reprobox.runspecific._pairing import FolderPair, StructuralPairs, pair_by_structure
from reprobox.runspecific._readings import CLOCK_READING
from reprobox.runspecific._series import SERIES_MEAN, SERIES_SPREAD, SERIES_SUM
from reprobox.runspecific._window import Window, is_reading

__all__ = [
    "ADDRESS_BY_LOOK",
    "CLOCK_ID",
    "CLOCK_MARK",
    "CLOCK_READING",
    "CONCURRENT_LINES",
    "DURATION",
    "DURATION_BY_NAME",
    "DURATION_COARSE",
    "DURATION_OF_CLOCK",
    "HOSTNAME",
    "MEAN_OF_CLOCK",
    "MEMORY_ADDRESS",
    "NAME_PART",
    "PAIRED_FOLDER",
    "PROCESS_ID",
    "RANDOM_ID",
    "RATE_OF_CLOCK",
    "RUN_DIRECTORY",
    "SERIES_MEAN",
    "SERIES_SPREAD",
    "SERIES_SUM",
    "TIMESTAMP",
    "Excuse",
    "FolderPair",
    "RunContext",
    "StructuralPairs",
    "Window",
    "classify_value",
    "for_file",
    "judge_elements",
    "judge_value",
    "last_key",
    "mask",
    "mask_file_name",
    "mask_pair",
    "masked_name",
    "pair_by_structure",
    "reason_by_key",
    "unexplained_duration",
]

DURATION_BY_NAME = (
    "a duration or throughput figure (by its name: the run's record of its clocks is incomplete: "
    "a program of the job that is not Python, a bound, or a clock the guest could not wrap, left "
    "readings out)"
)
DURATION_COARSE = f"a duration or throughput figure (by its name: {UNTESTABLE})"
PAIRED_FOLDER = "a run-specific folder name (what lies under it pairs file for file)"
CONCURRENT_LINES = "log lines of concurrent writers in another order, each stamped by the run's clock"
CLOCK_MARK = "<time>"
BY_NAME = "its name"
BY_RECORD = "the run's own record"


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
    name: str,
    a: object,
    b: object,
    run_a: RunContext,
    run_b: RunContext,
    *,
    names: Collection[str] = (),
    counts: Sequence[int] = (),
) -> Excuse | None:
    """Why two differing values are run-specific, or None for a real difference. ``counts``: whole numbers
    written beside the values, equal in both runs, that a rate may be over (a sentence's)."""
    if _number(a) and _number(b):
        by_record = _by_record(name, a, b, run_a, run_b, counts=counts)  # type: ignore[arg-type]
        if by_record is not None:
            return by_record
    by_name = _by_name(name, a, b, run_a, run_b, names=names) if _scalar(a) and _scalar(b) else None
    if by_name is not None:
        return by_name
    if _number(a) and _number(b) and _reads_clock(a, run_a) and _reads_clock(b, run_b):
        return Excuse(TIMESTAMP, BY_RECORD)
    named_pid = reason_by_key(name, names) == PROCESS_ID
    if _pid_pair(a, b, run_a, run_b) and (named_pid or min(a, b) >= MIN_PID):  # type: ignore[call-overload]
        return Excuse(PROCESS_ID, BY_RECORD)
    (masked_a, reasons_a), (masked_b, reasons_b) = _masked_pair(a, b, run_a, run_b)
    if masked_a == masked_b and (reasons_a or reasons_b):
        return Excuse(" and ".join(sorted(reasons_a | reasons_b)), BY_RECORD)
    return None


def judge_elements(
    name: str, pairs: Sequence[tuple[float, float]], run_a: RunContext, run_b: RunContext
) -> Excuse | None:
    """Why an array's differing elements are run-specific: each pair (run a's element, run b's) a figure
    of its own run's clock, to the digit (a checkpoint's array of fold or iteration times); None when any
    is not, when the arrays' name says the training computed them, or when no pair differs. Never by the
    name: a tensor that no record explains is a real difference whatever it is called."""
    clock_a, clock_b = run_a.clock, run_b.clock
    if clock_a is None or clock_b is None or not pairs or names_computed(name):
        return None
    kinds: set[str] = set()
    for a, b in pairs:
        kind_a, kind_b = explains(clock_a, a, name), explains(clock_b, b, name)
        if kind_a in (None, UNTESTABLE) or kind_b in (None, UNTESTABLE):
            return None
        kinds.add(kind_a)
    what = " or ".join(sorted(kinds))
    return Excuse(f"each of its {len(pairs)} differing elements is {what}", BY_RECORD)


def _by_record(
    name: str, a: float, b: float, run_a: RunContext, run_b: RunContext, *, counts: Sequence[int] = ()
) -> Excuse | None:
    """Two numbers each a figure of its own run's clock (never one its name says the training computed),
    a reading of its monotonic clock, a draw of its entropy, a uuid1 it made or an address it mapped."""
    if run_a.clock is not None and run_b.clock is not None and not names_computed(name):
        kind_a = explains(run_a.clock, a, name, counts=counts)
        kind_b = explains(run_b.clock, b, name, counts=counts)
        if kind_a not in (None, UNTESTABLE) and kind_b not in (None, UNTESTABLE):
            return Excuse(kind_a, BY_RECORD)
        count = count_in(name)
        paired = explains_pair(run_a.clock, a, run_b.clock, b, (count,) if count is not None else counts)
        if paired is not None:  # each too coarse alone, or a difference of one: both at one place
            return Excuse(paired, BY_RECORD)
    readings_a, readings_b = run_a.readings, run_b.readings
    if readings_a is not None and readings_b is not None and readings_a.holds(a) and readings_b.holds(b):
        return Excuse(CLOCK_READING, BY_RECORD)
    return _whole_numbers(a, b, run_a, run_b) if type(a) is int and type(b) is int else None


def _whole_numbers(a: int, b: int, run_a: RunContext, run_b: RunContext) -> Excuse | None:
    """Two whole numbers, each a draw of its own run's entropy, a uuid1 it made or an address it mapped."""
    records = ((RANDOM_ID, run_a.drawn, run_b.drawn), (CLOCK_ID, run_a.clock_ids, run_b.clock_ids))
    for reason, record_a, record_b in records:
        if (
            record_a is not None
            and record_b is not None
            and record_a.holds_number(a)
            and record_b.holds_number(b)
        ):
            return Excuse(reason, BY_RECORD)
    memory_a, memory_b = run_a.memory, run_b.memory
    if memory_a is not None and memory_b is not None and min(a, b) >= MIN_DECIMAL_ADDRESS:
        return Excuse(MEMORY_ADDRESS, BY_RECORD) if memory_a.holds(a) and memory_b.holds(b) else None
    return None


def _by_name(
    name: str, a: object, b: object, run_a: RunContext, run_b: RunContext, *, names: Collection[str]
) -> Excuse | None:
    """The name, where the runs recorded no fact to judge the values by: a duration where the record of
    their clocks is missing or incomplete, a host or pid in records older than such facts."""
    by_key = reason_by_key(name, names)
    if by_key == DURATION:
        if not (_clock_complete(run_a) and _clock_complete(run_b)):
            return Excuse(DURATION_BY_NAME, BY_NAME)
        # untestable as what the name says it is: a random number named epoch_time that no duration of
        # the record explains is real, however many rates the record's readings could make of it; and a
        # value its own run's record refutes is real, however coarse the other run's value is
        kinds = (RATE_OF_CLOCK,) if names_rate(name) else (DURATION_OF_CLOCK, MEAN_OF_CLOCK)
        found = (explains(run_a.clock, a, name, kinds), explains(run_b.clock, b, name, kinds))  # type: ignore[arg-type]
        return Excuse(DURATION_COARSE, BY_NAME) if UNTESTABLE in found and None not in found else None
    unrecorded = {
        HOSTNAME: not (run_a.all_hostnames() or run_b.all_hostnames()),
        PROCESS_ID: not (run_a.pids or run_b.pids),
    }
    return Excuse(by_key, BY_NAME) if by_key is not None and unrecorded.get(by_key) else None


def _clock_complete(run: RunContext) -> bool:
    """Whether the run's record of its clocks can judge a duration alone: present and nothing dropped."""
    return run.clock is not None and run.clock.complete


def unexplained_duration(name: str, names: Collection[str] = ()) -> str | None:
    """What a differing value named like a duration is told when the run's record explains it not: a
    clock read in C is not recorded, and only the job file can say a value is one."""
    if reason_by_key(name, names) != DURATION:
        return None
    return (
        "named like a duration, but no reading the run's Python took of its clocks explains it; if a clock "
        "read in C measured it, list it under compare: ignore"
    )


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


Masked = tuple[object, set[str]]


def _masked_pair(a: object, b: object, run_a: RunContext, run_b: RunContext) -> tuple[Masked, Masked]:
    """Both values masked as ``_masked_value`` masks each, walked side by side where they have the same
    shape, so that two strings at the same place are masked together (``mask_pair``: a decimal equal in
    both is kept in both)."""
    if isinstance(a, str) and isinstance(b, str):
        return mask_pair(a, b, run_a, run_b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        items = [_masked_pair(x, y, run_a, run_b) for x, y in zip(a, b, strict=True)]
        return _gathered([m for m, _ in items], list), _gathered([m for _, m in items], list)
    if isinstance(a, Mapping) and isinstance(b, Mapping) and a.keys() == b.keys():
        keys = [str(k) for k in a]
        pairs = [_masked_pair(a[k], b[k], run_a, run_b) for k in a]
        return (
            _gathered([m for m, _ in pairs], lambda v: dict(zip(keys, v, strict=True))),
            _gathered([m for _, m in pairs], lambda v: dict(zip(keys, v, strict=True))),
        )
    return _masked_value(a, run_a), _masked_value(b, run_b)


def _gathered(items: list[Masked], build: Callable[[list[object]], object]) -> Masked:
    reasons: set[str] = set()
    for _, why in items:
        reasons |= why
    return build([value for value, _ in items]), reasons
