"""TensorBoard event files read fast give what a reader of one record at a time, field by field, gives.

The event reader checks every record's checksums at once (NumPy, records of one length side by side) and
reads the scalar events ``SummaryWriter.add_scalar`` writes straight from their bytes. Its names, values,
order and errors are frozen by the hashing contract, so each test here compares it with the plain reader
(``plain_read``: one record at a time, each checksum in plain Python, every event parsed field by field)
over files torch's SummaryWriter wrote and over mutated ones.
"""

from __future__ import annotations

import random
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from reprobox.guest.hashing._crc32c import MIN_LANES, masked_crc32c, masked_crc32c_many
from reprobox.guest.hashing._logvalues import LogValues
from reprobox.guest.hashing._protowire import Message
from reprobox.guest.hashing._tbscalars import ScalarEvents
from reprobox.guest.hashing._tensorboard import _event, read_events
from reprobox.guest.hashing._tfrecord import record_spans
from tests.fuzz.mutate import tfrecord
from tests.wire import varint

EVENTS = "events.out.tfevents.1.host.1.0"


def plain_read(data: bytes) -> str:
    """What the reader gave before it took shortcuts, as text (``repr`` of the pairs, or the error)."""
    found, view, pos = LogValues(), memoryview(data), 0
    try:
        while pos < len(data):
            if len(data) - pos < 12:
                raise ValueError(
                    f"cut short: {len(data) - pos} bytes at byte {pos} are not a whole record header"
                )
            (length,) = struct.unpack_from("<Q", data, pos)
            if masked_crc32c(data[pos : pos + 8]) != struct.unpack_from("<I", data, pos + 8)[0]:
                raise ValueError(f"the record at byte {pos}: the checksum of its length fails")
            if length > len(data) - pos - 16:
                left = max(0, len(data) - pos - 16)
                raise ValueError(f"the record at byte {pos} claims {length} bytes, more than the {left} left")
            body = view[pos + 12 : pos + 12 + length]
            if masked_crc32c(body) != struct.unpack_from("<I", data, pos + 12 + length)[0]:
                raise ValueError(f"the record at byte {pos}: the checksum of its data fails")
            _event(Message(body), found)
            pos += 16 + length
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"
    return repr(found.pairs)


def fast_read(data: bytes, folder: Path) -> str:
    path = folder / EVENTS
    path.write_bytes(data)
    try:
        return repr(read_events(path))
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"


def others(data: bytes) -> list[bytes]:
    """The records the scalar reader leaves to the generic one."""
    spans = ScalarEvents(LogValues()).others(data, record_spans(data))
    return [data[start:end] for start, end in spans]


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def scalar_body(tag: bytes, step_bytes: bytes, value: bytes = struct.pack("<f", 0.5)) -> bytes:
    """An add_scalar event; ``step_bytes`` is the step field's varint as written (any encoding)."""
    step = b"\x10" + step_bytes if step_bytes else b""
    summary = field(1, field(1, tag) + b"\x15" + value)
    return b"\x09" + struct.pack("<d", 1.7e9) + step + field(5, summary)


# --- files torch's SummaryWriter wrote -----------------------------------------------------------


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Every kind of event torch 2's SummaryWriter writes, scalars in each shape and at each step size."""
    from torch.utils.tensorboard import SummaryWriter

    folder = tmp_path_factory.mktemp("runs")
    writer = SummaryWriter(log_dir=str(folder))
    for step in (0, 1, 127, 128, 300, 2**14, 2**21 + 5, 2**40, -3):
        writer.add_scalar("loss/train", 1.0 / (abs(step) + 1), step)
    for step in range(200):  # records of one length in numbers: their checksums are computed as lanes
        writer.add_scalar("lr", 0.001 * step, step)
        writer.add_scalar("lr/new", 0.5 * step, step, new_style=True)
    writer.add_scalar("lr/double", 0.1, 4, new_style=True, double_precision=True)
    writer.add_scalar("loss/train", 2.0, 1)  # a tag logged twice at one step: #2
    writer.add_scalar("ünïcode/τ", float("nan"), 2)
    writer.add_scalar("x" * 130, float("inf"), 3)  # lengths of two bytes: the generic reader's
    writer.add_scalar("clockless", 1.0, 5, walltime=0.0)  # proto3 leaves the zero clock out
    writer.add_scalars("group", {"a": 1.0, "b": 2.0}, 1)  # one file of scalars per key
    writer.add_histogram("weights", torch.arange(10.0), 2)
    writer.add_image("sample", torch.zeros(3, 4, 5), 7)
    writer.add_text("note", "hello", 0)
    writer.add_pr_curve("pr", torch.tensor([0, 1, 1, 0]), torch.tensor([0.1, 0.9, 0.8, 0.3]), 1)
    writer.add_audio("beep", torch.zeros(1, 100), 1, sample_rate=8000)
    writer.add_custom_scalars({"group": {"losses": ["Multiline", ["loss/train"]]}})
    writer.add_hparams({"lr": 0.1}, {"hparam/loss": 0.5})
    with warnings.catch_warnings():  # add_graph traces with torch.jit.trace, which torch deprecates
        warnings.simplefilter("ignore", DeprecationWarning)
        writer.add_graph(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()), torch.zeros(1, 3))
    writer.close()
    return sorted(folder.rglob("events.out.tfevents.*"))


def test_files_summary_writer_wrote_read_as_the_plain_reader_reads_them(
    written: list[Path], tmp_path: Path
) -> None:
    assert len(written) >= 4  # the writer's own, add_scalars' two, add_hparams'
    for path in written:
        data = path.read_bytes()
        assert fast_read(data, tmp_path) == plain_read(data), path


def test_scalar_events_of_every_shape_are_read_straight_from_their_bytes(written: list[Path]) -> None:
    data = min(written, key=lambda p: len(p.parts)).read_bytes()  # the writer's own, not a subfolder's
    left = others(data)
    assert len(left) < 20 < len(list(record_spans(data))) - 400
    assert not any(b"lr/new" in record or b"lr/double" in record for record in left)
    assert not any(b"loss/train\x15" in record for record in left)
    assert any(b"x" * 130 in record for record in left)  # two-byte lengths
    assert any(b"clockless" in record for record in left)  # no clock field


def test_tags_past_those_remembered_are_checked_event_by_event_alike(
    written: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reprobox.guest.hashing import _tbscalars

    monkeypatch.setattr(_tbscalars, "MAX_KNOWN_TAGS", 1)
    data = min(written, key=lambda p: len(p.parts)).read_bytes()
    assert fast_read(data, tmp_path) == plain_read(data)
    assert len(others(data)) < 20  # still read straight from their bytes


# --- mutated records -----------------------------------------------------------------------------


def test_mutated_scalar_events_read_as_the_plain_reader_reads_them(
    written: list[Path], tmp_path: Path
) -> None:
    """Each record changed (bytes flipped, inserted, cut) and framed again with good checksums: the
    shortcut takes a record only when it is exactly a shape it knows."""
    records = [bytes(b) for path in written for b in _records(path.read_bytes()) if len(b) < 200]
    rng = random.Random(20261128)
    for _ in range(600):
        body = bytearray(rng.choice(records))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(body) + 1)
            kind = rng.random()
            if kind < 0.6 and at < len(body):
                body[at] = rng.choice((rng.randrange(256), body[at] ^ 0x80, body[at] + 1 & 0xFF))
            elif kind < 0.8:
                body[at:at] = bytes([rng.randrange(256)])
            else:
                del body[at : at + rng.randint(1, 4)]
        data = tfrecord(records[0]) + tfrecord(bytes(body)) + tfrecord(records[-1])
        assert fast_read(data, tmp_path) == plain_read(data), bytes(body).hex(" ")


def test_steps_and_tags_of_every_encoding_read_as_the_plain_reader_reads_them(tmp_path: Path) -> None:
    steps = [b""] + [
        varint(n) for n in (0, 1, 127, 128, 2**14 - 1, 2**14, 2**21 - 1, 2**21, 2**63, 2**64 - 1)
    ]
    steps += [b"\x80\x00", b"\xff\x80\x00", b"\xff" * 9 + b"\x7f", b"\xff" * 10 + b"\x01", b"\xff" * 11]
    tags = [b"", b"t", b"loss/train", "τ".encode(), b"\xff\xfe", b"y" * 113, b"y" * 114, b"y" * 130]
    for step in steps:
        for tag in tags:
            data = tfrecord(scalar_body(tag, step)) + tfrecord(
                scalar_body(tag, step, struct.pack("<f", -1.5))
            )
            assert fast_read(data, tmp_path) == plain_read(data), (step, tag)


def test_lengths_written_as_one_byte_past_127_are_not_taken_for_a_scalar(tmp_path: Path) -> None:
    """A hostile writer's length bytes of 0x80 and up, each alone: a varint that goes on, not a length."""
    for tag_length in (118, 119, 120, 121, 200, 247, 255):
        tag = b"z" * tag_length
        lengths = bytes((0x2A, tag_length + 9 & 0xFF, 0x0A, tag_length + 7 & 0xFF, 0x0A, tag_length))
        body = b"\x09" + struct.pack("<d", 1.7e9) + b"\x10\x05" + lengths + tag + b"\x15" + bytes(4)
        data = tfrecord(scalar_body(b"t", b"\x01")) + tfrecord(body)
        assert fast_read(data, tmp_path) == plain_read(data), tag_length


# --- checksums -----------------------------------------------------------------------------------


def test_checksums_of_many_records_at_once_are_each_records_own() -> None:
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, 1 << 16, dtype=np.uint8).tobytes()
    for length in (0, 1, 3, 4, 5, 8, 13, 47, 300):
        for count in (1, MIN_LANES - 1, MIN_LANES, 500):
            starts = rng.integers(0, len(data) - length, count)
            expected = [masked_crc32c(data[s : s + length]) for s in starts.tolist()]
            assert masked_crc32c_many(data, starts, length).tolist() == expected, (length, count)


def scalar_log(count: int) -> list[bytes]:
    return [tfrecord(scalar_body(b"loss", varint(step), struct.pack("<f", step))) for step in range(count)]


@pytest.mark.parametrize("damage", ["data", "length", "parse-first", "both"])
def test_a_failing_checksum_among_many_records_names_that_record(damage: str, tmp_path: Path) -> None:
    records = scalar_log(3000)
    offsets = np.cumsum([0] + [len(r) for r in records]).tolist()
    k = 2021
    data = bytearray(b"".join(records))
    if damage in ("data", "both"):
        data[offsets[k] + 20] ^= 0x01
    if damage in ("length", "both"):
        data[offsets[k]] ^= 0x01
    if damage == "parse-first":  # an event that does not parse before the failing checksum: it is named
        bad = tfrecord(b"\x08\x01")  # wall_time as a varint
        data = bytearray(b"".join(records[:5]) + bad + b"".join(records[5:]))
        data[offsets[k] + len(bad) + 20] ^= 0x01
    data[offsets[2500] + 20] ^= 0x01  # a later failure is not the one named
    found = fast_read(bytes(data), tmp_path)
    assert found == plain_read(bytes(data))
    if damage == "parse-first":
        assert "not the 64-bit value" in found
    else:
        what = "data" if damage == "data" else "length"
        assert found == f"ValueError: the record at byte {offsets[k]}: the checksum of its {what} fails"


def test_randomly_damaged_files_fail_as_the_plain_reader_fails(tmp_path: Path) -> None:
    """Bytes flipped anywhere, checksums left stale, or the file cut: the same first error."""
    data = b"".join(scalar_log(100))
    rng = random.Random(5)
    for _ in range(200):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        if rng.random() < 0.3:
            del damaged[rng.randrange(len(damaged)) :]
        assert fast_read(bytes(damaged), tmp_path) == plain_read(bytes(damaged))


def _records(data: bytes) -> list[bytes]:
    return [data[start:end] for start, end in record_spans(data)]
