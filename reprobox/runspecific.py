"""Which differences between two runs are run-specific (a run's own paths, clock, host), and why.

A verdict must never call runs "not reproducible" over something that names the run rather than what it
computed: the run's own directories and id, a wall-clock timestamp, a duration or throughput figure, the
host name or a process id. Everything else that differs is a real difference. Two tests, both narrow:

- by value: two strings that become equal once each run's own directories, run id and host name, and any
  timestamps, are masked (``/runs/job/20261123T1200Z-ab12cd/outputs/ckpt`` vs the other run's, or HF's
  ``runs/Nov23_12-00-01_host`` logging dir);
- by name: scalars under a key that names a duration, throughput, timestamp, host or process id
  (``train_runtime``, ``eval_samples_per_second``, ``saved_at``, ``hostname``, ``pid``). Tensors are
  never excused by name.

Output files are paired by their names with what logging tools put in them masked (``mask_file_name``:
TensorBoard's time, host and pid, W&B's and MLflow's run ids, Hydra's date and time folders), and those
parts of a file's own path are masked inside its values too (``for_file``): an MLflow run's meta.yaml
holds the id its folder is named by.

Pure functions over the run records' facts, so the rules are unit-tested and cited in the verdict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

RUN_DIRECTORY = "a path under the run's own directory"
TIMESTAMP = "a wall-clock timestamp"
DURATION = "a duration or throughput figure"
HOSTNAME = "the host name"
PROCESS_ID = "a process id"
NAME_PART = "a run id or time in the file's own path"

_TIMESTAMP_PATTERNS = (
    # ISO 8601 date-times, with optional fractions and zone: 2026-11-23T12:00:01.5Z, 2026-11-23 12:00:01
    r"\d{4}-\d{2}-\d{2}[T _]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
    # folder-safe stamps: 2026-11-23_12-00-01 (Hydra, Lightning), 20261123T120001Z, 20261123-120001
    r"\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}",
    r"\d{8}[T_-]?\d{6}Z?",
    # TensorBoard's and the HF Trainer's default run folder: Nov23_12-00-01
    r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\d{2}_\d{2}-\d{2}-\d{2}",
    # a time of day: 12:00:01, 12:00:01.123
    r"(?<![\d:])\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?![\d:])",
    # Unix time in seconds (2001..2033) or milliseconds, inside a string
    r"(?<!\d)1[0-9]{9}(?:\.\d+)?(?!\d)",
    r"(?<!\d)1[0-9]{12}(?!\d)",
)
_TIMESTAMP = re.compile("|".join(f"(?:{p})" for p in _TIMESTAMP_PATTERNS))

_DURATION_KEY = re.compile(
    r"(?:^|_)(?:runtime|duration|elapsed|elapsed_time|wall_?time|wallclock|time|seconds|secs|took|latency)$"
    r"|per_?sec(?:ond)?s?(?:$|_)|_per_s$|throughput|(?:^|_)time_(?:s|sec|ms|seconds)$",
    re.IGNORECASE,
)
_TIMESTAMP_KEY = re.compile(
    r"(?:^|_)(?:timestamp|date|datetime|wall_time|start_time|end_time|created|creation|saved|started|"
    r"finished|ended|updated|last_update|modified)(?:_at|_on|_time)?$|_at$",
    re.IGNORECASE,
)
_HOST_KEY = re.compile(r"^(?:hostname|host|host_name|node|nodename|node_name|machine)$", re.IGNORECASE)
_PID_KEY = re.compile(r"^(?:pid|ppid|process_id|processid)$", re.IGNORECASE)
_MIN_HOSTNAME = 3  # shorter names would mask ordinary words


@dataclass(frozen=True)
class RunContext:
    """What names one run rather than its results: its own paths and id, and the host it ran on."""

    paths: tuple[str, ...]  # absolute paths the run owned (run dir, outputs, code snapshot, stable paths)
    run_id: str
    hostname: str | None
    name_parts: tuple[str, ...] = ()  # run ids and times in one output's path (see ``for_file``)

    @classmethod
    def from_record(cls, run_dir: str, data: Mapping[str, Any]) -> RunContext:
        """Collect the facts from a manifest's fields (any may be missing in older records)."""
        found: set[str] = {run_dir, f"{run_dir}/outputs"}
        code = data.get("code") or {}
        for key in ("snapshot",):
            if isinstance(code.get(key), str):
                found.add(code[key])
        runtime = data.get("runtime") or {}
        for value in _strings(runtime.get("paths") or {}):
            found.add(value)
        environment = data.get("environment") or {}
        for key in ("REPROBOX_OUTPUT_DIR", "REPROBOX_RUN_DIR", "TMPDIR"):
            if isinstance(environment.get(key), str):
                found.add(environment[key])
        hardware = (data.get("fingerprint") or {}).get("hardware") or {}
        hostname = hardware.get("hostname") if isinstance(hardware.get("hostname"), str) else None
        paths = tuple(sorted((p.rstrip("/") for p in found if p.startswith("/") and len(p) > 1), key=len))
        return cls(paths=paths[::-1], run_id=str(data.get("run_id") or ""), hostname=hostname)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def mask(text: str, run: RunContext) -> tuple[str, set[str]]:
    """The text with the run's own paths, id, host name and timestamps replaced, and what was replaced."""
    reasons: set[str] = set()
    for path in run.paths:  # longest first: the outputs folder before the run folder that holds it
        if path in text:
            text, reasons = text.replace(path, "<run>"), reasons | {RUN_DIRECTORY}
    if run.run_id and run.run_id in text:
        text, reasons = text.replace(run.run_id, "<run-id>"), reasons | {RUN_DIRECTORY}
    if run.hostname and len(run.hostname) >= _MIN_HOSTNAME:
        pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(run.hostname)}(?![A-Za-z0-9])")
        text, count = pattern.subn("<host>", text)
        if count:
            reasons.add(HOSTNAME)
    text, count = _TIMESTAMP.subn("<time>", text)
    if count:
        reasons.add(TIMESTAMP)
    for part in run.name_parts:  # after the clock: a logged date-time reads as a time, not as a name
        if part in text:
            text, reasons = text.replace(part, "<name>"), reasons | {NAME_PART}
    return text, reasons


def last_key(name: str) -> str:
    """The innermost key of a dotted value name (``log_history.3.train_runtime`` -> ``train_runtime``)."""
    parts = [p for p in name.split(".") if p and not p.isdigit()]
    return parts[-1] if parts else name


def reason_by_key(name: str) -> str | None:
    """Why a scalar under this name is run-specific whatever its value, or None."""
    key = last_key(name)
    if _TIMESTAMP_KEY.search(key):
        return TIMESTAMP
    if _DURATION_KEY.search(key):
        return DURATION
    if _HOST_KEY.match(key):
        return HOSTNAME
    if _PID_KEY.match(key):
        return PROCESS_ID
    return None


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float)


def classify_value(name: str, a: object, b: object, run_a: RunContext, run_b: RunContext) -> str | None:
    """Why two differing values are run-specific ("a wall-clock timestamp"), or None for a real difference."""
    if _scalar(a) and _scalar(b) and not isinstance(a, bool) and not isinstance(b, bool):
        by_key = reason_by_key(name)
        if by_key is not None:
            return by_key
    masked_a, reasons_a = _masked_value(a, run_a)
    masked_b, reasons_b = _masked_value(b, run_b)
    if masked_a == masked_b and (reasons_a or reasons_b):
        return " and ".join(sorted(reasons_a | reasons_b))
    return None


def _masked_value(value: object, run: RunContext) -> tuple[object, set[str]]:
    """Strings masked anywhere inside lists and mappings (a saved argv, a config dict held as one value)."""
    if isinstance(value, str):
        return mask(value, run)
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
    """A tensor, value or file name with the run's own paths, id, host and timestamps masked."""
    return mask(name, run)[0]


RANDOM_ID = "a random run id"
RUN_COUNTER = "a counter of earlier runs"
# The names logging tools give a run's files: what in them names the run, never what it computed. Each
# named group is a run-specific part; the same part inside the file's values is masked too (a W&B run's
# id in its metadata, an MLflow run's id in its meta.yaml, Hydra's time folder in its config).
_TOOL_NAMES: tuple[tuple[re.Pattern[str], str, frozenset[str]], ...] = (
    # TensorBoard: events.out.tfevents.<unix time>.<host>.<pid>.<n>
    (
        re.compile(
            r"(events\.out\.tfevents\.)(?P<time>\d+(?:\.\d+)?)\.(?P<host>[^/]+?)\.(?P<pid>\d+)(\.\d+)$"
        ),
        r"\1<time>.<host>.<pid>\5",
        frozenset({TIMESTAMP, HOSTNAME, PROCESS_ID}),
    ),
    # W&B: wandb/offline-run-20261126_120000-1a2b3c4d/ and its run-1a2b3c4d.wandb
    (
        re.compile(r"((?:offline-)?run-)(?P<stamp>\d{8}_\d{6})-(?P<id>[a-z0-9]{8})(?=/|$)"),
        r"\1<time>-<id>",
        frozenset({TIMESTAMP, RANDOM_ID}),
    ),
    (re.compile(r"(^|/)run-(?P<id>[a-z0-9]{8})(\.wandb)$"), r"\1run-<id>\3", frozenset({RANDOM_ID})),
    # Lightning's logger folders count earlier runs: lightning_logs/version_3/
    (re.compile(r"(^|/)(version_)\d+(?=/)"), r"\1\2<n>", frozenset({RUN_COUNTER})),
    # MLflow's file store: mlruns/<experiment id>/<32-hex run id>/
    (
        re.compile(r"(^|/)(mlruns/)(?P<experiment>\d+)/(?P<run>[0-9a-f]{32})(?=/|$)"),
        r"\1\2<experiment>/<run-id>",
        frozenset({RANDOM_ID}),
    ),
    # Hydra: outputs/2026-11-26/12-00-01/ (and multirun/...); a bare date or time of day as a folder
    (re.compile(r"(^|/)(?P<date>\d{4}-\d{2}-\d{2})(?=/)"), r"\1<date>", frozenset({TIMESTAMP})),
    (re.compile(r"(^|/)(?P<time>\d{2}-\d{2}-\d{2})(?=/|$)"), r"\1<time>", frozenset({TIMESTAMP})),
)
_MIN_NAME_PART = 6
"""Shorter run-specific parts of a name (a pid, experiment 0) are not masked inside values: too common."""


def mask_file_name(path: str, run: RunContext) -> tuple[str, set[str]]:
    """An output's path with what names the run masked (its paths, host, clock, and the time, host, pid
    and random ids logging tools put in their file names), and what was masked. Files are paired by
    it; their contents are still compared, so a pairing never excuses a difference inside."""
    reasons: set[str] = set()
    for pattern, replacement, why in _TOOL_NAMES:
        path, count = pattern.subn(replacement, path)
        if count:
            reasons |= why
    masked, more = mask(path, run)
    return masked, reasons | more


def for_file(run: RunContext, path: str) -> RunContext:
    """The run's context for the values of one output file: the run-specific parts of its path (a run
    id, a time folder) are the run's own names inside it too."""
    parts: set[str] = set()
    for pattern, _, _ in _TOOL_NAMES:
        for match in pattern.finditer(path):
            parts.update(v for v in match.groupdict().values() if v and len(v) >= _MIN_NAME_PART)
    return replace(run, name_parts=tuple(sorted(parts, key=len, reverse=True)))
