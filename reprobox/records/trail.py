"""The hash trail's file format (`trail.jsonl`, schema reprobox.trail/1), for its writer and its readers.

The guest's step hook (`reprobox.guest.trail`) appends one JSON object a line; the controller
(`reprobox.trails`) and a rerun's hook (reading its reference as it grows) read them back. Three kinds:

    {"schema": "reprobox.trail/1", "every": 20, "max_steps": null, "pid": 7}      a process started
    {"step": 20, "model": "<sha256>", "params": {"fc.weight": ["<digest>", <sum>, <l2 norm>]},
     "scalars": {"loss": 0.71}}                                                      optimizer step 20
    {"step_scalars": 12, "scalars": {"accuracy": 0.5}}                 values logged for a past step

A job that declares `resume:` also digests, at each step, what the next step depends on besides the
parameters: `"state": {"rng.torch": "<sha256>", "optimizer.0": "<sha256>", ...}`; a resumed run's header
says after which step it started (`"start": 30`), its first step being 31.

A line that is none of these (torn when a run was killed mid-write, or anything the job wrote there)
is skipped and counted; a header of a trail version this reprobox does not read is refused.

The job's processes import this module once they import torch: it stays light (no typing, no
dataclasses, no reprobox module that reads files until a reader runs).
"""

from __future__ import annotations

import json

from reprobox.fileio import loads_bounded
from reprobox.records._shape import is_int, is_number, unknown_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any, TypeGuard

TRAIL_SCHEMA_PREFIX = "reprobox.trail/"
TRAIL_SCHEMA = TRAIL_SCHEMA_PREFIX + "1"
TRAIL_LIMIT = 1 << 30  # the job can write the trail: reading it is bounded like any of its files
LINE_LIMIT = 64 << 20
STOP_FILE = "stop.json"  # in the guest state folder: why the step hook ended the job early
STOP_FILE_LIMIT = 1 << 20
STOP_DIVERGED = "diverged"  # the rerun's digests differ from its reference's at `step`
STOP_MAX_STEPS = "max_steps"  # --max-steps was reached (a prefix check)

# field names of the three kinds of line
SCHEMA, EVERY, MAX_STEPS, PID, START = "schema", "every", "max_steps", "pid", "start"
STEP, MODEL, PARAMS, SCALARS, STEP_SCALARS = "step", "model", "params", "scalars", "step_scalars"
STATE = "state"


class TrailVersionError(ValueError):
    """A trail header names a version of the format this reprobox does not read."""


class _Record:
    """Equal when their fields are; shown by their JSON form (plain classes: no dataclasses here)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json()!r})"


class TrailHeader(_Record):
    """One process's first line: how often it records, and where it stops."""

    __slots__ = ("every", "max_steps", "pid", "start")

    def __init__(
        self, every: int | None, max_steps: int | None = None, pid: int | None = None, start: int = 0
    ) -> None:
        self.every = every
        self.max_steps = max_steps
        self.pid = pid
        self.start = start  # a resumed run: the step its checkpoint was saved after

    def to_json(self) -> dict[str, Any]:
        record = {SCHEMA: TRAIL_SCHEMA, EVERY: self.every, MAX_STEPS: self.max_steps, PID: self.pid}
        if self.start:
            record[START] = self.start
        return record


class StepRecord(_Record):
    """One recorded optimizer step: per parameter [digest, sum, L2 norm], the model digest, scalars."""

    __slots__ = ("model", "params", "scalars", "state", "step")

    def __init__(
        self,
        step: int,
        params: dict[str, list[Any]],
        model: str | None = None,
        scalars: dict[str, float] | None = None,
        state: dict[str, str] | None = None,
    ) -> None:
        self.step = step
        self.params = params
        self.model = model
        self.scalars = scalars or {}
        self.state = state or {}  # RNG, optimizer and scheduler digests (jobs that declare `resume:`)

    def digests(self) -> dict[str, str]:
        """Parameter name -> digest: what decides whether two steps are identical."""
        return {name: str(value[0]) for name, value in self.params.items()}

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {STEP: self.step, MODEL: self.model, PARAMS: self.params}
        if self.scalars:
            record[SCALARS] = self.scalars
        if self.state:
            record[STATE] = self.state
        return record


class StepScalars(_Record):
    """Values a job logged for an optimizer step already recorded (`reprobox.trail.log`)."""

    __slots__ = ("scalars", "step")

    def __init__(self, step: int, scalars: dict[str, float]) -> None:
        self.step = step
        self.scalars = scalars

    def to_json(self) -> dict[str, Any]:
        return {STEP_SCALARS: self.step, SCALARS: self.scalars}


def encode_line(record: TrailHeader | StepRecord | StepScalars) -> str:
    """One line of the trail: compact JSON, keys sorted, ending in a newline."""
    return json.dumps(record.to_json(), sort_keys=True, separators=(",", ":")) + "\n"


def decode_line(line: str | bytes) -> TrailHeader | StepRecord | StepScalars | None:
    """The record a line holds, or None when it is not one of the expected shape.

    Raises TrailVersionError for the header of a trail version this reprobox does not read.
    """
    try:
        item = loads_bounded(line)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(item, dict):
        return None
    return _header(item) if SCHEMA in item else _step(item)


def _step(item: Mapping[str, Any]) -> StepRecord | StepScalars | None:
    scalars = item.get(SCALARS) or {}
    if not _scalars_ok(scalars):
        return None
    if PARAMS in item:
        step, params, model, state = item.get(STEP), item[PARAMS], item.get(MODEL), item.get(STATE, {})
        if not (_is_step(step) and _params_ok(params) and (model is None or isinstance(model, str))):
            return None
        if not _state_ok(state):
            return None
        return StepRecord(step, params, model, scalars, state)
    step = item.get(STEP_SCALARS)
    return StepScalars(step, scalars) if _is_step(step) else None


def _header(item: Mapping[str, Any]) -> TrailHeader | None:
    schema, every, max_steps = item.get(SCHEMA), item.get(EVERY), item.get(MAX_STEPS)
    if schema != TRAIL_SCHEMA:
        if isinstance(schema, str) and schema.startswith(TRAIL_SCHEMA_PREFIX):
            raise TrailVersionError(schema)
        return None
    if not all(value is None or (is_int(value) and value > 0) for value in (every, max_steps)):
        return None
    pid, start = item.get(PID), item.get(START, 0)
    return TrailHeader(every, max_steps, pid if is_int(pid) else None, start if _is_step(start) else 0)


def _is_step(value: Any) -> TypeGuard[int]:
    return is_int(value) and value >= 0


def _params_ok(params: Any) -> bool:
    """{name: [digest, sum, norm, ...]}: what digests() and the divergence series index into."""
    return isinstance(params, dict) and all(
        isinstance(value, list)
        and len(value) >= 3
        and isinstance(value[0], str)
        and is_number(value[1])
        and is_number(value[2])
        for value in params.values()
    )


def _state_ok(state: Any) -> bool:
    """{key: digest}, both strings; a step recorded without state has none (`[]` or null is malformed)."""
    return isinstance(state, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in state.items()
    )


def _scalars_ok(scalars: Any) -> bool:
    return isinstance(scalars, dict) and all(is_number(v) for v in scalars.values())


class HashTrail:
    """One run's trail as read: parameter records by optimizer step, and scalars by step."""

    def __init__(self) -> None:
        self.steps: dict[int, StepRecord] = {}
        self.scalars: dict[int, dict[str, float]] = {}
        self.every: int | None = None
        self.skipped = 0  # lines that were not a trail record (torn, too long, or of the wrong shape)

    def add(self, record: TrailHeader | StepRecord | StepScalars | None) -> None:
        if record is None:
            self.skipped += 1
        elif isinstance(record, TrailHeader):
            self.every = record.every if record.every is not None else self.every
        else:
            if isinstance(record, StepRecord):
                self.steps[record.step] = record
            if record.scalars:
                self.scalars.setdefault(record.step, {}).update(record.scalars)


def read_trail(path: Path, *, root: Path | None = None) -> HashTrail:
    """Parse trail.jsonl, streamed; a missing file is an empty trail.

    A trail that is not a regular file, or is over TRAIL_LIMIT bytes, raises saferead.UnsafeFile; one
    whose header names another version of the format raises SpecError saying what to do.
    """
    from reprobox import saferead  # the controller's reader: the guest's writer never needs it

    trail = HashTrail()
    try:
        for line in saferead.iter_lines(path, limit=TRAIL_LIMIT, line_limit=LINE_LIMIT, root=root):
            if line is not None and not line.strip():
                continue
            trail.add(None if line is None else decode_line(line))
    except FileNotFoundError:
        pass
    except TrailVersionError as exc:
        from reprobox.errors import Problem, SpecError

        sentence = "is " + unknown_version(
            str(exc),
            TRAIL_SCHEMA,
            TRAIL_SCHEMA_PREFIX,
            "compare this run with the reprobox version that made it",
            "is this a reprobox trail?",
        )
        raise SpecError([Problem(path, None, SCHEMA, sentence)]) from None
    return trail


TAIL_BYTES = 64 << 10  # how much of a growing trail's end is read to tell the step it has reached
_STEP_KEY = b'"' + STEP.encode() + b'":'


def last_step(path: Path, *, root: Path | None = None) -> int | None:
    """The optimizer step of the last step record in the trail's last TAIL_BYTES bytes (None when there
    is none yet): cheap enough to poll while the job writes the file, and read through saferead, since
    the job can put anything there. `encode_line` sorts keys and "step" sorts after every other key of
    a step record, so a line ends with its step even when the tail holds only the end of the line.

    FileNotFoundError passes through (no trail yet); saferead.UnsafeFile when it is not a regular file.
    """
    from reprobox import saferead

    whole = saferead.read_tail(path, TAIL_BYTES, root=root).split(b"\n")[:-1]  # the rest is half-written
    for line in reversed(whole):
        _, key, value = line.rstrip().rpartition(_STEP_KEY)
        digits = value[:-1]
        if key and value.endswith(b"}") and digits.isdigit() and len(digits) <= 18:
            return int(digits)
    return None


class StoppedEarly(_Record):
    """Why the step hook ended a job before its end (`stop.json`, then the manifest's `stopped_early`)."""

    __slots__ = ("parameters", "reason", "step")

    def __init__(self, reason: str, step: int, parameters: list[str] | None = None) -> None:
        self.reason = reason
        self.step = step
        self.parameters = parameters

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"reason": self.reason, STEP: self.step}
        if self.parameters is not None:
            record["parameters"] = self.parameters
        return record

    @classmethod
    def from_json(cls, data: Any) -> StoppedEarly | None:
        """The stop as recorded, or None when `data` is not one (the job's processes write the file)."""
        if not isinstance(data, dict):
            return None
        reason, step, parameters = data.get("reason"), data.get(STEP), data.get("parameters")
        if not isinstance(reason, str) or not _is_step(step):
            return None
        if parameters is not None and not (
            isinstance(parameters, list) and all(isinstance(p, str) for p in parameters)
        ):
            return None
        return cls(reason, step, parameters)
