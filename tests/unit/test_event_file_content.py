"""A TensorBoard event file is known by its first record as well as by its name: CatBoost writes
``catboost_info/learn/events.out.tfevents`` with no suffix, and a renamed file is still one. Only the
first bytes the table of readers reads anyway are looked at: the length's checksum, the first record and
its checksum, and the first event's ``file_version``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reprobox.guest.hashing import _readers
from reprobox.guest.hashing._sniff import HEAD_BYTES
from tests.fuzz.mutate import tfrecord


@pytest.fixture(scope="module")
def event_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    folder = tmp_path_factory.mktemp("runs")
    writer = SummaryWriter(log_dir=str(folder))
    for step in range(3):
        writer.add_scalar("learn/Logloss", 0.7 - step / 10, step)
    writer.close()
    (written,) = folder.glob("events.out.tfevents.*")
    return written


FILE_VERSION = b"\x1a\x0dbrain.Event:2"  # Event field 3, a string of 13 bytes


@pytest.mark.parametrize("name", ["catboost_info/learn/events.out.tfevents", "anything.bin", "log"])
def test_an_event_file_under_any_name_is_read_as_tensorboard(
    event_file: Path, tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(event_file, path)
    assert _readers.format_of(path) == "tensorboard"
    values = _readers.load(path)[1]
    expected = _readers.load(event_file)[1]
    assert values == expected and values["learn/Logloss.step_2"] == pytest.approx(0.5)


def test_a_first_record_that_is_no_event_file_version_is_not_an_event_file(tmp_path: Path) -> None:
    path = tmp_path / "data.dat"
    path.write_bytes(tfrecord(b"\x1a\x05other") + b"rest")  # framing right, another file_version
    assert _readers.format_of(path) == "file"
    path.write_bytes(tfrecord(FILE_VERSION)[:-1] + b"\x00")  # its data's checksum fails
    assert _readers.format_of(path) == "file"
    path.write_bytes(tfrecord(FILE_VERSION))
    assert _readers.format_of(path) == "tensorboard"


def test_a_first_record_longer_than_the_bytes_sniffed_is_not_read_for_detection(tmp_path: Path) -> None:
    path = tmp_path / "big.dat"
    unknown_field = b"\x32\xf4\x03" + b"\x00" * 500  # field 6, 500 bytes: the record runs past the head
    path.write_bytes(tfrecord(FILE_VERSION + unknown_field))
    assert len(path.read_bytes()) > HEAD_BYTES
    assert _readers.format_of(path) == "file"


def test_a_renamed_damaged_event_file_is_compared_by_its_bytes_with_the_reason(
    event_file: Path, tmp_path: Path
) -> None:
    data = bytearray(event_file.read_bytes())
    data[-3] ^= 0xFF  # the last record's data checksum
    path = tmp_path / "events.out.tfevents"
    path.write_bytes(bytes(data))
    content = _readers.plan(path)
    assert content.format == "file" and "not a readable TensorBoard event file" in (content.note or "")
