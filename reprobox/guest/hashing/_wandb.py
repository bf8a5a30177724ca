"""W&B run files (``wandb/offline-run-<date>_<time>-<id>/run-<id>.wandb``) read as named values.

A ``.wandb`` file is W&B's transaction log (wandb/sdk/internal/datastore.py, core/pkg/leveldb): a 7-byte
W&B header (``:W&B``, magic 0xBEE1, version 0), then LevelDB's log format: 32 KiB blocks of chunks,
each with a 7-byte header (checksum, uint16 length, type FULL/FIRST/MIDDLE/LAST); a block's last 6 bytes
or fewer are zero padding. W&B's checksum is CRC-32 (IEEE, not LevelDB's masked CRC-32C) over the type
byte and the data, as both its writers compute it. Each record is a ``Record`` message of
wandb/proto/wandb_internal.proto; the field numbers below are that file's.

What is compared, and under which names (see ``_logvalues``):

- history rows (``wandb.log``): each key as ``<key>.step_<n>`` (a media or histogram value's JSON fields
  under it); the row's own ``_timestamp`` and ``_runtime`` as ``step_<n>._timestamp`` and
  ``step_<n>._runtime``, a timestamp and a duration to ``runspecific``; ``_step`` is the ``n``;
- the summary and the config, as they stand after every update and removal (W&B re-sends the summary on
  a timer, so how often it was written is not a result): ``summary.<key>``, ``config.<key>``;
- the run's own fields (``run.project``, ``run.run_id``, ``run.host``, ``run.start_time``, ``run.tags``,
  ``run.git.commit`` ...) and how it ended (``exit.exit_code``, ``exit.runtime``);
- metric definitions, saved files, artifacts, alerts, telemetry and TensorBoard sync records, each as the
  sha256 of its message less W&B's stream id (``telemetry.0``, ``files.1``).

Left out, because they describe the machine and the clock rather than what the job computed: system
statistics (sampled on a timer), the environment (host, disks, start time, a random writer id), console
output (the run's stdout.log holds it), the header's W&B version, and the records that only mark a
moment (final, footer, preempting) or are requests between W&B's processes.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

from reprobox.fileio import loads_bounded
from reprobox.guest.hashing._bounds import OverLimit
from reprobox.guest.hashing._logvalues import MAX_KEY_DEPTH, LogValues, read_capped, sha256_hex
from reprobox.guest.hashing._protowire import Message

READER_NAME = "W&B run file reader"
SUFFIX = ".wandb"

MAX_WANDB_FILE_BYTES = 128 << 20
"""Larger run files are compared as bytes (they hold console output and system statistics too)."""

READ_SECONDS = 5.0
"""Reading one file's records stops past this much CPU time (the reading thread's: a busy machine does not
change what is read), whatever they hold: a file of millions of tiny records is
within the size cap, but each record costs the reader microseconds of Python."""

HEADER = b":W&B" + struct.pack("<H", 0xBEE1) + b"\x00"
BLOCK = 32 * 1024
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4

# Record (wandb_internal.proto): fields of the record itself, then the record_type oneof
_RECORD_OWN = frozenset({1, 16, 19, 200})  # num, control, uuid, _info
_INFO = 200  # _RecordInfo (stream_id: the W&B run id) inside every record message
_HISTORY, _SUMMARY, _CONFIG, _RUN, _EXIT = 2, 3, 5, 17, 18
_DIGESTED = {
    6: "files",
    8: "artifact",
    9: "tbrecord",
    10: "alert",
    11: "telemetry",
    12: "metric",
    25: "use_artifact",
}
_LEFT_OUT = frozenset(
    {
        4,  # output (console lines)
        7,  # stats (system metrics, on a timer)
        13,  # output_raw
        20,  # final
        21,  # header (W&B's version)
        22,  # footer
        23,  # preempting
        24,  # noop_link_artifact
        26,  # environment (host, disks, start time, writer id)
        27,  # output_logger
        100,  # request
    }
)
# HistoryRecord: item 1, step 2 (HistoryStep: num 1); HistoryItem/SummaryItem/ConfigItem: key 1,
# nested_key 2, value_json 16; SummaryRecord/ConfigRecord: update 1, remove 2
_HISTORY_ITEM, _HISTORY_STEP, _STEP_NUM = 1, 2, 1
_ITEM_KEY, _ITEM_NESTED_KEY, _ITEM_VALUE_JSON = 1, 2, 16
_UPDATE, _REMOVE = 1, 2
# RunRecord: name -> (field, kind)
_RUN_FIELDS = {
    "run_id": (1, "string"),
    "entity": (2, "string"),
    "project": (3, "string"),
    "run_group": (6, "string"),
    "job_type": (7, "string"),
    "display_name": (8, "string"),
    "notes": (9, "string"),
    "tags": (10, "strings"),
    "sweep_id": (12, "string"),
    "host": (13, "string"),
    "starting_step": (14, "int"),
    "start_time": (17, "timestamp"),
    "resumed": (18, "bool"),
    "runtime": (20, "int"),
    "forked": (22, "bool"),
}
_RUN_CONFIG, _RUN_SUMMARY, _RUN_GIT = 4, 5, 21


def is_wandb_file(path: Path) -> bool:
    return path.suffix == SUFFIX


def records(data: bytes) -> Iterator[memoryview]:
    """The log's records, each reassembled from its chunks and checksum-checked; ValueError otherwise.

    Yielded one at a time, so that a file of many tiny records never holds them all at once."""
    if data[: len(HEADER)] != HEADER:
        raise ValueError("it does not start with W&B's header (':W&B', magic 0xBEE1, version 0)")
    view = memoryview(data)
    pending: list[memoryview] | None = None
    pos, size = len(HEADER), len(view)
    while pos < size:
        block_end = min(size, (pos // BLOCK + 1) * BLOCK)
        if block_end - pos < CHUNK_HEADER or _zero(view[pos : pos + CHUNK_HEADER]):
            if any(view[pos:block_end]):
                raise ValueError(f"the padding at byte {pos} is not zero")
            pos = block_end
            continue
        checksum, length, kind = struct.unpack_from("<IHB", view, pos)
        start, end = pos + CHUNK_HEADER, pos + CHUNK_HEADER + length
        if end > block_end:
            raise ValueError(
                f"the chunk at byte {pos} runs {end - block_end} bytes past its block or the file"
            )
        chunk = view[start:end]
        if zlib.crc32(chunk, zlib.crc32(bytes((kind,)))) != checksum:
            raise ValueError(f"the chunk at byte {pos}: its checksum fails")
        if kind == FULL and pending is None:
            yield chunk
        elif kind == FIRST and pending is None:
            pending = [chunk]
        elif kind in (MIDDLE, LAST) and pending is not None:
            pending.append(chunk)
            if kind == LAST:
                whole, pending = memoryview(b"".join(pending)), None
                yield whole
        else:
            raise ValueError(f"the chunk at byte {pos} has type {kind}, out of order or unknown")
        pos = end
    if pending is not None:
        raise ValueError("cut short: the last record's chunks stop before its end")


def _zero(header: memoryview) -> bool:
    return not any(header)


def read_wandb(path: Path) -> list[tuple[str, object]]:
    """The run file's values as (name, value) pairs; ValueError says why it cannot be read."""
    data = read_capped(path, MAX_WANDB_FILE_BYTES, "of a W&B run file")
    run = _RunState()
    deadline = time.thread_time() + READ_SECONDS
    for count, raw in enumerate(records(data)):
        if count % 1024 == 0 and time.thread_time() > deadline:
            raise OverLimit(
                f"reading its records takes over {READ_SECONDS} s of CPU time, the limit ({count} read)"
            )
        record = Message(raw)
        for number in record.numbers():
            if number not in _RECORD_OWN and number not in _LEFT_OUT:
                inner = record.message(number)
                if inner is not None:
                    run.take(number, inner)
    return run.values()


class _RunState:
    """What the records say so far: history rows as they come, the rest folded until the end."""

    def __init__(self) -> None:
        self.found = LogValues()
        self.run: dict[str, object] = {}
        self.summary: dict[str, object] = {}
        self.config: dict[str, object] = {}
        self.exits: list[Message] = []
        self.counts: dict[str, int] = {}
        self.rows = 0

    def take(self, number: int, inner: Message) -> None:
        if number == _HISTORY:
            _history(inner, self.rows, self.found)
            self.rows += 1
        elif number == _SUMMARY:
            _fold(inner, self.summary)
        elif number == _CONFIG:
            _fold(inner, self.config)
        elif number == _RUN:
            _run(inner, self.run, self.summary, self.config)
        elif number == _EXIT:
            self.exits.append(inner)
        else:
            kind = _DIGESTED.get(number, f"record_{number}")
            index = self.counts.get(kind, 0)
            self.counts[kind] = index + 1
            self.found.add(f"{kind}.{index}", sha256_hex(inner.without(_INFO)))

    def values(self) -> list[tuple[str, object]]:
        found = self.found
        for key in sorted(self.run):
            found.add(f"run.{key}", self.run[key])
        for name, state in (("summary", self.summary), ("config", self.config)):
            if state:
                found.add_tree(name, state)
        for index, ending in enumerate(self.exits):
            name = "exit" if index == 0 else f"exit#{index + 1}"
            found.add(f"{name}.exit_code", ending.int64(1))
            found.add(f"{name}.runtime", ending.int64(2))
        return found.pairs


def _item(item: Message) -> tuple[list[str], object]:
    """An item's key path (``key``, or ``nested_key``'s parts) and its parsed ``value_json``."""
    key = item.string(_ITEM_KEY)
    path = [key] if key else item.strings(_ITEM_NESTED_KEY)
    if len(path) > MAX_KEY_DEPTH:
        raise OverLimit(f"a key nests {len(path)} levels, more than the limit of {MAX_KEY_DEPTH}")
    raw = item.string(_ITEM_VALUE_JSON)
    try:
        value = loads_bounded(raw) if raw else None
    except ValueError as exc:  # JSONDecodeError and JsonTooDeep are ValueErrors
        raise ValueError(f"the value of '{'.'.join(path)}' is not JSON ({exc})") from None
    return path or [""], value


def _history(row: Message, index: int, found: LogValues) -> None:
    items = [_item(item) for item in row.messages(_HISTORY_ITEM)]
    step_message = row.message(_HISTORY_STEP)
    logged_step = next((v for p, v in items if p == ["_step"] and type(v) is int), None)
    step = step_message.int64(_STEP_NUM) if step_message is not None else logged_step
    if step is None:
        step = index
    for path, value in items:
        key = ".".join(path)
        if key == "_step":
            continue
        if key.startswith("_"):  # W&B's own fields of the row: its clock
            found.add_tree(found.unique(f"step_{step}.{key}"), value)
        else:
            found.add_tree(found.unique(f"{key}.step_{step}"), value)


def _fold(record: Message, state: dict[str, object]) -> None:
    """A summary or config record applied to what the earlier ones left (updates, then removals)."""
    for item in record.messages(_UPDATE):
        path, value = _item(item)
        node = state
        for key in path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = {}
                node[key] = child
            node = child
        node[path[-1]] = value
    for item in record.messages(_REMOVE):
        path, _ = _item(item)
        node = state
        for key in path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                break
            node = child
        else:
            node.pop(path[-1], None)


def _run(
    record: Message, run: dict[str, object], summary: dict[str, object], config: dict[str, object]
) -> None:
    """The run's own fields (a later run record updates them), its first config and summary."""
    for name, (number, kind) in _RUN_FIELDS.items():
        if not record.has(number) and name in run:
            continue
        if kind == "string":
            run[name] = record.string(number)
        elif kind == "strings":
            run[name] = record.strings(number)
        elif kind == "int":
            run[name] = record.int64(number)
        elif kind == "bool":
            run[name] = bool(record.varint(number))
        else:
            stamp = record.message(number)
            run[name] = None if stamp is None else stamp.int64(1) + stamp.int64(2) / 1e9
    git = record.message(_RUN_GIT)
    if git is not None:
        run["git.remote_url"], run["git.commit"] = git.string(1), git.string(2)
    for number, state in ((_RUN_CONFIG, config), (_RUN_SUMMARY, summary)):
        inner = record.message(number)
        if inner is not None:
            _fold(inner, state)
