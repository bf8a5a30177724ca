"""TensorBoard event files (``events.out.tfevents.*``, or any file whose first record is an event that
names the format) read as named values: the numbers, not the clocks.

Every event a ``SummaryWriter`` writes carries the wall time, so two runs that logged the same numbers
never write the same bytes. Read here: the TFRecord framing (``_tfrecord``: uint64 length, masked
CRC-32C of the length, the data, masked CRC-32C of the data; both checked, and a file that fails either
is refused whole) and the ``Event`` message of tensorboard/compat/proto/event.proto and summary.proto,
field numbers as written there; the scalar events that are the bulk of a long run's log straight from
their bytes (``_tbscalars``), with the same names and values.

Names (see ``_logvalues``): each summary value is ``<tag>.step_<n>``: the scalar itself, a tensor's
values (with ``.dtype`` and ``.shape``), an image's or audio clip's encoded bytes as their sha256 (with
their sizes), a histogram's fields under it (``.min`` ``.max`` ``.num`` ``.sum`` ``.sum_squares``
``.bucket_limit`` ``.bucket``); its plugin metadata as ``.plugin`` and ``.metadata_sha256``, and the
event's clock as ``.wall_time`` (a timestamp to ``runspecific``). The first event's ``file_version``
and ``source_metadata.writer`` are values too; a graph (``add_graph``) is its nodes and attributes, its
maps read as maps whatever their byte order (``graph_def.step_<n>.node.<i>.attr.<key>``, see
``_graphdef``); meta graphs and run metadata are digests (``meta_graph_def.step_<n>``).

Order: events are named by tag and step, not by their place in the file. A deterministic job logs in
the same order every run, so this costs nothing there; where the order alone differs (tags logged from
two threads) the numbers are what the job computed, and they are compared. Events of one tag at one step
are told apart by their order (``#2``), the only thing that can.
"""

from __future__ import annotations

import struct
from pathlib import Path

from reprobox.guest.hashing import _sniff
from reprobox.guest.hashing._crc32c import masked_crc32c
from reprobox.guest.hashing._graphdef import graph_values
from reprobox.guest.hashing._logvalues import LogValues, read_capped, sha256_hex
from reprobox.guest.hashing._protowire import Message, signed64
from reprobox.guest.hashing._tbscalars import ScalarEvents
from reprobox.guest.hashing._tfrecord import FOOTER_BYTES, HEADER_BYTES, record_spans

EVENT_FILE_PREFIX = "events.out.tfevents."
READER_NAME = "TensorBoard event reader"

MAX_EVENT_FILE_BYTES = 64 << 20
"""Larger event files are compared as bytes: the checksums of long records (images, audio) that share no
length are computed in plain Python (under 10 MB/s). A log of scalars reads at about 10 MB/s whole (see
``_tbscalars``), and 64 MiB of them is over a million events, past the values one file may hold anyway."""

MAX_TENSOR_ELEMENTS = 1 << 16
"""A logged tensor with more elements is compared by the sha256 of its bytes, not element by element."""

# Event (event.proto)
_WALL_TIME, _STEP, _FILE_VERSION, _GRAPH_DEF, _SUMMARY = 1, 2, 3, 4, 5
_LOG_MESSAGE, _SESSION_LOG, _TAGGED_RUN_METADATA, _META_GRAPH_DEF, _SOURCE_METADATA = 6, 7, 8, 9, 10
# Summary and Summary.Value (summary.proto)
_SUMMARY_VALUE = 1
_TAG, _SIMPLE_VALUE, _OLD_HISTOGRAM, _IMAGE, _HISTO, _AUDIO, _NODE_NAME, _TENSOR, _METADATA = (
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
)
_PLUGIN_DATA, _PLUGIN_NAME = 1, 1
# TensorProto (tensor.proto) and TensorShapeProto (tensor_shape.proto)
_DTYPE, _SHAPE, _CONTENT = 1, 2, 4
_SHAPE_DIM, _DIM_SIZE = 2, 1
_STRING_VAL = 8

# DataType (types.proto): name, the struct code of tensor_content, and the *_val field and its encoding
_DTYPES: dict[int, tuple[str, str | None]] = {
    1: ("DT_FLOAT", "f"),
    2: ("DT_DOUBLE", "d"),
    3: ("DT_INT32", "i"),
    4: ("DT_UINT8", "B"),
    5: ("DT_INT16", "h"),
    6: ("DT_INT8", "b"),
    7: ("DT_STRING", None),
    8: ("DT_COMPLEX64", "f"),
    9: ("DT_INT64", "q"),
    10: ("DT_BOOL", "?"),
    14: ("DT_BFLOAT16", "H"),
    17: ("DT_UINT16", "H"),
    18: ("DT_COMPLEX128", "d"),
    19: ("DT_HALF", "e"),
    22: ("DT_UINT32", "I"),
    23: ("DT_UINT64", "Q"),
}
# *_val fields: number -> "double" | "float" | "varint" (signed) | "uvarint"
_VAL_FIELDS = {
    5: "float",  # float_val
    6: "double",  # double_val
    7: "varint",  # int_val
    9: "float",  # scomplex_val
    10: "varint",  # int64_val
    11: "uvarint",  # bool_val
    12: "double",  # dcomplex_val
    13: "uvarint",  # half_val (bits), also bfloat16
    16: "uvarint",  # uint32_val
    17: "uvarint",  # uint64_val
}


def is_event_file(path: Path) -> bool:
    """By its name (``events.out.tfevents.<seconds>.<host>...``), else by its first record: CatBoost
    writes ``catboost_info/learn/events.out.tfevents``, with no suffix, and a file may be renamed."""
    return path.name.startswith(EVENT_FILE_PREFIX) or _sniff.memo(
        path, "event file", _starts_with_file_version
    )


FILE_VERSION_PREFIX = "brain.Event:"
"""What every event file's first event says it is (``brain.Event:2``)."""


def _starts_with_file_version(path: Path) -> bool:
    """Whether the file's first bytes (``_sniff.HEAD_BYTES``: no more is read) hold a whole TFRecord,
    both checksums right, whose event names the event file format. The length's checksum is checked
    first, so any other file is told apart by its first 12 bytes."""
    try:
        head = _sniff.head(path)
    except OSError:  # a path by name alone (no file there): nothing to recognise
        return False
    if len(head) < HEADER_BYTES + FOOTER_BYTES or masked_crc32c(head[:8]) != int.from_bytes(
        head[8:12], "little"
    ):
        return False
    end = HEADER_BYTES + int.from_bytes(head[:8], "little")
    if end + FOOTER_BYTES > len(head) or masked_crc32c(head[HEADER_BYTES:end]) != int.from_bytes(
        head[end : end + FOOTER_BYTES], "little"
    ):
        return False
    try:
        return Message(head[HEADER_BYTES:end]).string(_FILE_VERSION).startswith(FILE_VERSION_PREFIX)
    except ValueError:
        return False


def read_events(path: Path) -> list[tuple[str, object]]:
    """The event file's values as (name, value) pairs; ValueError says why it cannot be read."""
    data = read_capped(path, MAX_EVENT_FILE_BYTES, "of an event file")
    found = LogValues()
    view = memoryview(data)
    # scalar events, the bulk of a long run's log, are read straight from their bytes; the rest here
    for start, end in ScalarEvents(found).others(data, record_spans(data)):
        _event(Message(view[start:end]), found)
    return found.pairs


def _event(event: Message, found: LogValues) -> None:
    wall_time, step = event.double(_WALL_TIME), event.int64(_STEP)
    if event.has(_FILE_VERSION):
        name = found.unique("file_version")
        found.add(name, event.string(_FILE_VERSION))
        found.add(f"{name}.wall_time", wall_time)
    source = event.message(_SOURCE_METADATA)
    if source is not None:
        found.add(found.unique("source_metadata.writer"), source.string(1))
    summary = event.message(_SUMMARY)
    if summary is not None:
        for value in summary.messages(_SUMMARY_VALUE):
            tag = value.string(_TAG) or value.string(_NODE_NAME)
            name = found.unique(f"{tag}.step_{step}")
            _summary_value(value, name, found)
            found.add(f"{name}.wall_time", wall_time)
    if event.has(_GRAPH_DEF):  # its maps read as maps: their byte order changes from run to run
        name = found.unique(f"graph_def.step_{step}")
        graph_values(event.raw(_GRAPH_DEF), name, found)
        found.add(f"{name}.wall_time", wall_time)
    if event.has(_META_GRAPH_DEF):
        name = found.unique(f"meta_graph_def.step_{step}")
        found.add(name, sha256_hex(event.raw(_META_GRAPH_DEF)))
        found.add(f"{name}.wall_time", wall_time)
    tagged = event.message(_TAGGED_RUN_METADATA)
    if tagged is not None:
        name = found.unique(f"run_metadata/{tagged.string(1)}.step_{step}")
        found.add(name, sha256_hex(tagged.raw(2)))
        found.add(f"{name}.wall_time", wall_time)
    session = event.message(_SESSION_LOG)
    if session is not None:
        name = found.unique(f"session_log.step_{step}")
        found.add(f"{name}.status", session.varint(1))
        found.add(f"{name}.checkpoint_path", session.string(2))
        found.add(f"{name}.msg", session.string(3))
        found.add(f"{name}.wall_time", wall_time)
    log = event.message(_LOG_MESSAGE)
    if log is not None:
        name = found.unique(f"log_message.step_{step}")
        found.add(f"{name}.level", log.int64(1))
        found.add(f"{name}.message", log.string(2))
        found.add(f"{name}.wall_time", wall_time)


def _summary_value(value: Message, name: str, found: LogValues) -> None:
    if value.has(_SIMPLE_VALUE):
        found.add(name, value.float32(_SIMPLE_VALUE))
    if value.has(_OLD_HISTOGRAM):
        found.add(name, sha256_hex(value.raw(_OLD_HISTOGRAM)))
    histo = value.message(_HISTO)
    if histo is not None:
        for number, field in enumerate(("min", "max", "num", "sum", "sum_squares"), start=1):
            found.add(f"{name}.{field}", histo.double(number))
        found.add(f"{name}.bucket_limit", histo.doubles(6))
        found.add(f"{name}.bucket", histo.doubles(7))
    image = value.message(_IMAGE)
    if image is not None:
        found.add(name, sha256_hex(image.raw(4)))
        found.add(f"{name}.height", image.int64(1))
        found.add(f"{name}.width", image.int64(2))
        found.add(f"{name}.colorspace", image.int64(3))
    audio = value.message(_AUDIO)
    if audio is not None:
        found.add(name, sha256_hex(audio.raw(4)))
        found.add(f"{name}.sample_rate", audio.float32(1))
        found.add(f"{name}.num_channels", audio.int64(2))
        found.add(f"{name}.length_frames", audio.int64(3))
        found.add(f"{name}.content_type", audio.string(5))
    tensor = value.message(_TENSOR)
    if tensor is not None:
        _tensor(tensor, name, found)
    metadata = value.message(_METADATA)
    if metadata is not None:
        plugin = metadata.message(_PLUGIN_DATA)
        found.add(f"{name}.plugin", "" if plugin is None else plugin.string(_PLUGIN_NAME))
        found.add(f"{name}.metadata_sha256", sha256_hex(metadata.data))


def _tensor(tensor: Message, name: str, found: LogValues) -> None:
    code = tensor.varint(_DTYPE)
    dtype, element = _DTYPES.get(code, (f"dtype {code}", None))
    shape_message = tensor.message(_SHAPE)
    shape = (
        [signed64(dim.varint(_DIM_SIZE)) for dim in shape_message.messages(_SHAPE_DIM)]
        if shape_message is not None
        else []
    )
    values: list[object]
    if tensor.has(_CONTENT):
        content = tensor.raw(_CONTENT)
        width = struct.calcsize(f"<{element}") if element else 0
        if not width or len(content) % width or len(content) // width > MAX_TENSOR_ELEMENTS:
            found.add(name, {"tensor_content_sha256": sha256_hex(content)})
            found.add(f"{name}.dtype", dtype)
            found.add(f"{name}.shape", shape)
            return
        values = [v for (v,) in struct.iter_unpack(f"<{element}", content)]
    else:
        values = _listed_values(tensor)
        if len(values) > MAX_TENSOR_ELEMENTS:
            found.add(name, {"values_sha256": sha256_hex(repr(values).encode())})
            found.add(f"{name}.dtype", dtype)
            found.add(f"{name}.shape", shape)
            return
    found.add(name, values[0] if not shape and len(values) == 1 else values)
    found.add(f"{name}.dtype", dtype)
    found.add(f"{name}.shape", shape)


def _listed_values(tensor: Message) -> list[object]:
    """The values a TensorProto lists field by field (float_val, string_val, ...), in field order."""
    values: list[object] = []
    for number in sorted(tensor.numbers()):
        kind = _VAL_FIELDS.get(number)
        if number == _STRING_VAL:
            values.extend(_string(raw) for raw in tensor.repeated_raw(number))
        elif kind == "float":
            values.extend(tensor.floats(number))
        elif kind == "double":
            values.extend(tensor.doubles(number))
        elif kind == "varint":
            values.extend(signed64(v) for v in tensor.varints(number))
        elif kind == "uvarint":
            values.extend(tensor.varints(number))
    return values


def _string(raw: bytes) -> object:
    """A string tensor's element: text when it is UTF-8 (TensorBoard's text plugin), else its bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
