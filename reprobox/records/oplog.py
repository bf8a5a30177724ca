"""The operation log's file format (`oplog/rank<R>.jsonl`, schema reprobox.oplog/1), writer and reader.

A replay of the optimizer steps where two runs first diverged records every aten operation of those
steps (forward, backward, optimizer, data loading) with a digest of each tensor it read and wrote
(`reprobox.guest.oplog`); the controller aligns two such logs (`reprobox.forensics.drilldown`).
One JSON object a line, of four kinds:

    {"schema": "reprobox.oplog/1", "rank": 0, "pid": 7, "threads": 4, "steps": [6, 7], ...}   header
    {"step": 7, "i": 12, "op": "aten::addmm", "phase": "forward", "module": "body",
     "class": "Linear", "source": "train.py:23", "in": [ARG, ...], "out": [ARG, ...], "t": <ns>}
    {"step": 7, "batch": 3, "in": [ARG, ...]}          a batch a DataLoader yielded (its index in the epoch)
    {"step": 7, "model_input": "Net", "in": [ARG, ...]}    what the outermost module's forward was given

An ARG is a tensor, {"d": "<digest>", "shape": [4, 3], "dtype": "float32"} with, where known, "tag"
(param:NAME, buffer:NAME, optim:NAME) and "at": [offset, nbytes] (its bytes in `rank<R>.bin`, saved
for outputs within a budget so the controller can count differing elements), or another value,
{"v": "<repr>"}. An op may carry "rng" (the digest of the generator's state before a random draw) and
"bitwise": true (PyTorch tags the op nondeterministic_bitwise).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobox.fileio import loads_bounded
from reprobox.records._shape import is_int, unknown_version

OPLOG_SCHEMA_PREFIX = "reprobox.oplog/"
OPLOG_SCHEMA = OPLOG_SCHEMA_PREFIX + "1"
OPLOG_DIR = "oplog"  # in the run dir
OPLOG_LIMIT = 2 << 30  # written by the job's processes: read bounded like any of its files
LINE_LIMIT = 16 << 20
VALUES_LIMIT = 64 << 20  # saved output bytes read back for one tensor


def log_name(rank: int) -> str:
    return f"rank{rank}.jsonl"


def values_name(rank: int) -> str:
    return f"rank{rank}.bin"


def encode_line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), allow_nan=False, default=str) + "\n"


@dataclass(frozen=True)
class Arg:
    """One argument or result of an operation: a tensor (digest, shape, dtype) or another value."""

    digest: str | None = None
    shape: tuple[int, ...] = ()
    dtype: str = ""
    tag: str | None = None
    at: tuple[int, int] | None = None
    value: str | None = None

    @property
    def is_tensor(self) -> bool:
        return self.digest is not None

    @property
    def identity(self) -> str:
        """What two runs' arguments are compared by: the digest, or the value's text."""
        return self.digest if self.digest is not None else f"={self.value}"

    def describe(self) -> str:
        if not self.is_tensor:
            return str(self.value)
        return f"{self.dtype}{list(self.shape)}"

    def to_json(self) -> dict[str, Any]:
        if not self.is_tensor:
            return {"v": self.value}
        data: dict[str, Any] = {"d": self.digest, "shape": list(self.shape), "dtype": self.dtype}
        if self.tag:
            data["tag"] = self.tag
        return data


@dataclass(frozen=True)
class OpEvent:
    """One recorded operation (or a batch, or the model's input) of one optimizer step."""

    step: int
    kind: str  # "op", "batch", "model_input"
    index: int = 0
    op: str = ""
    phase: str = ""
    module: str = ""
    module_class: str = ""
    source: str = ""
    inputs: tuple[Arg, ...] = ()
    outputs: tuple[Arg, ...] = ()
    time_ns: int = 0
    rng: str | None = None
    bitwise: bool = False
    batch: int | None = None

    @property
    def key(self) -> tuple[str, str, tuple[tuple[int, ...], ...]]:
        """What aligns the two runs' operations: name, module, input shapes (not values, not index)."""
        return (self.op, self.module, tuple(a.shape for a in self.inputs if a.is_tensor))


@dataclass
class OpLog:
    """One process's log: its header and its events, in the order they happened."""

    rank: int = 0
    header: dict[str, Any] = field(default_factory=dict)
    events: list[OpEvent] = field(default_factory=list)
    skipped: int = 0
    path: Path | None = None

    def ops(self, step: int) -> list[OpEvent]:
        return [e for e in self.events if e.kind == "op" and e.step == step]

    def of_kind(self, kind: str, step: int) -> list[OpEvent]:
        return [e for e in self.events if e.kind == kind and e.step == step]

    @property
    def steps(self) -> list[int]:
        return sorted({e.step for e in self.events})

    @property
    def values_path(self) -> Path | None:
        return None if self.path is None else self.path.with_name(values_name(self.rank))


def read_oplogs(run_dir: Path) -> dict[int, OpLog]:
    """Every rank's log in a run directory ({} when the run recorded none), read as the job's files."""
    from reprobox import saferead

    folder = run_dir / OPLOG_DIR
    if not folder.is_dir() or folder.is_symlink():
        return {}
    logs: dict[int, OpLog] = {}
    for path in sorted(folder.glob("rank*.jsonl"))[:4096]:
        rank_text = path.name.removeprefix("rank").removesuffix(".jsonl")
        if not rank_text.isdigit():
            continue
        log = OpLog(rank=int(rank_text), path=path)
        try:
            for line in saferead.iter_lines(path, limit=OPLOG_LIMIT, line_limit=LINE_LIMIT, root=run_dir):
                _add(log, line)
        except (saferead.UnsafeFile, OSError):
            continue  # a planted link or FIFO is no log
        logs[log.rank] = log
    return logs


def read_values(log: OpLog, arg: Arg) -> bytes | None:
    """The saved bytes of a tensor result, or None when they were not saved (or cannot be read)."""
    from reprobox import saferead

    path = log.values_path
    if arg.at is None or path is None:
        return None
    offset, size = arg.at
    if size > VALUES_LIMIT:
        return None
    try:
        fd = saferead.open_regular(path, root=path.parent.parent)
    except (saferead.UnsafeFile, OSError):
        return None
    try:
        data = os.pread(fd, size, offset)
    finally:
        os.close(fd)
    return data if len(data) == size else None


def _add(log: OpLog, line: bytes | None) -> None:
    if line is None or not line.strip():
        if line is None:
            log.skipped += 1
        return
    try:
        data = loads_bounded(line)
    except ValueError:
        log.skipped += 1
        return
    if not isinstance(data, dict):
        log.skipped += 1
        return
    if "schema" in data:
        schema = str(data["schema"])
        if schema != OPLOG_SCHEMA:
            from reprobox.errors import Problem, SpecError

            sentence = "is " + unknown_version(
                schema,
                OPLOG_SCHEMA,
                OPLOG_SCHEMA_PREFIX,
                "explain these runs with the reprobox that made them",
                "is this a reprobox operation log?",
            )
            raise SpecError([Problem(log.path or Path(OPLOG_DIR), None, "schema", sentence)])
        log.header = data
        return
    event = _event(data)
    if event is None:
        log.skipped += 1
    else:
        log.events.append(event)


def _event(data: dict[str, Any]) -> OpEvent | None:
    step = data.get("step")
    if not is_int(step):
        return None
    inputs = _args(data.get("in"))
    if inputs is None:
        return None
    if "batch" in data:
        batch = data["batch"]
        return OpEvent(step, "batch", inputs=inputs, batch=batch if is_int(batch) else None)
    if "model_input" in data:
        return OpEvent(step, "model_input", module_class=str(data["model_input"]), inputs=inputs)
    outputs = _args(data.get("out"))
    op, index = data.get("op"), data.get("i")
    if outputs is None or not isinstance(op, str) or not is_int(index):
        return None
    rng = data.get("rng")
    time_ns = data.get("t")
    return OpEvent(
        step,
        "op",
        index=index,
        op=op,
        phase=str(data.get("phase") or ""),
        module=str(data.get("module") or ""),
        module_class=str(data.get("class") or ""),
        source=str(data.get("source") or ""),
        inputs=inputs,
        outputs=outputs,
        time_ns=time_ns if is_int(time_ns) else 0,
        rng=rng if isinstance(rng, str) else None,
        bitwise=data.get("bitwise") is True,
    )


def _args(items: Any) -> tuple[Arg, ...] | None:
    if not isinstance(items, list):
        return None
    args = []
    for item in items:
        if not isinstance(item, dict):
            return None
        if "d" in item:
            shape = item.get("shape")
            at = item.get("at")
            args.append(
                Arg(
                    digest=str(item["d"]),
                    shape=tuple(int(s) for s in shape if is_int(s)) if isinstance(shape, list) else (),
                    dtype=str(item.get("dtype") or ""),
                    tag=str(item["tag"]) if item.get("tag") else None,
                    at=(at[0], at[1])
                    if isinstance(at, list) and len(at) == 2 and all(is_int(x) and x >= 0 for x in at)
                    else None,
                )
            )
        else:
            args.append(Arg(value=str(item.get("v"))))
    return tuple(args)
