"""Pickled datetimes and dates read as their ISO 8601 text, so a stamp is judged by the run's clock window."""

from __future__ import annotations

import calendar
import pickle
from datetime import date, datetime, timedelta, timezone, tzinfo
from pathlib import Path

import pytest

from reprobox.guest.hashing._canonical import flatten
from reprobox.guest.hashing._pickle import read_pickle
from reprobox.runspecific._clock import mask_clock
from reprobox.runspecific._window import Window

MOMENT = datetime(2026, 11, 29, 5, 20, 3, 390000)  # a Hyperopt book_time: UTC, to the millisecond


class Station(tzinfo):
    """A named zone that is not a fixed offset, pickled by its own class (as pytz and zoneinfo are)."""

    def __init__(self, name: str = "Mars/Olympus") -> None:
        self.name = name

    def utcoffset(self, dt: datetime | None) -> timedelta:
        return timedelta(hours=2)

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(0)

    def __reduce__(self) -> tuple[type[Station], tuple[str]]:
        return (Station, (self.name,))


def values(tmp_path: Path, obj: object, protocol: int) -> dict[str, object]:
    path = tmp_path / f"p{protocol}.pkl"
    path.write_bytes(pickle.dumps(obj, protocol=protocol))
    return dict(flatten(read_pickle(path).obj)[1])


@pytest.mark.parametrize("protocol", [0, 2, 3, 4, 5])
def test_datetimes_and_dates_read_as_their_iso_text(tmp_path: Path, protocol: int) -> None:
    saved = {
        "book_time": MOMENT,
        "utc": MOMENT.replace(tzinfo=timezone.utc),
        "ist": MOMENT.replace(tzinfo=timezone(timedelta(hours=5, minutes=30), "IST")),
        "west": MOMENT.replace(tzinfo=timezone(-timedelta(hours=3))),
        "day": MOMENT.date(),
        "early": datetime(1, 1, 1),
        "late": datetime(9999, 12, 31, 23, 59, 59, 999999),
    }
    got = values(tmp_path, saved, protocol)
    assert got == {
        "book_time": "2026-11-29T05:20:03.390000",
        "utc": "2026-11-29T05:20:03.390000+00:00",
        "ist": "2026-11-29T05:20:03.390000+05:30",
        "west": "2026-11-29T05:20:03.390000-03:00",
        "day": "2026-11-29",
        "early": "0001-01-01T00:00:00",
        "late": "9999-12-31T23:59:59.999999",
    }


def test_what_the_text_would_omit_is_kept_beside_it(tmp_path: Path) -> None:
    saved = {"zoned": MOMENT.replace(tzinfo=Station()), "second": MOMENT.replace(fold=1)}
    got = values(tmp_path, saved, 4)  # protocol 4 and later pickle the fold
    assert got["zoned.wall"] == "2026-11-29T05:20:03.390000"
    assert got["zoned.tzinfo.__args__"] == ["Mars/Olympus"]
    assert got["second.wall"] == "2026-11-29T05:20:03.390000" and got["second.fold"] == 1
    assert values(tmp_path, {"d": timedelta(seconds=3)}, 4)["d.__args__"] == [0, 3, 0]  # not a date


@pytest.mark.parametrize(
    "payload",
    [
        b"\x07\xea\x0d\x1d\x05\x14\x03\x05\xf3\x70",  # month 13
        b"\x07\xea\x0b\x1f\x05\x14\x03\x05\xf3\x70",  # November 31
        b"\x07\xea\x0b\x1d\x19\x14\x03\x05\xf3\x70",  # hour 25
        b"\x07\xea\x0b\x1d\x05\x14\x03\x0f\x42\x40",  # a million microseconds
        b"\x07\xea\x0b",  # too short
    ],
)
def test_bytes_that_hold_no_datetime_are_refused(tmp_path: Path, payload: bytes) -> None:
    class Forged:
        def __reduce__(self) -> tuple[type[datetime], tuple[bytes]]:
            return (datetime, (payload,))

    path = tmp_path / "forged.pkl"
    path.write_bytes(pickle.dumps({"book_time": Forged()}, protocol=4))
    with pytest.raises(ValueError, match="pickled datetime"):
        read_pickle(path)


def test_a_pickled_stamp_is_a_reading_inside_the_runs_window_and_a_value_outside(tmp_path: Path) -> None:
    start = calendar.timegm(MOMENT.timetuple()) - 3
    window = Window(start, start + 30, (19800,))  # a run in a zone five and a half hours ahead
    inside = {
        "book_time": MOMENT,  # UTC, as Hyperopt writes it
        "local": MOMENT + timedelta(hours=5, minutes=30),
        "aware": MOMENT.replace(tzinfo=timezone.utc),
    }
    for name, text in values(tmp_path, inside, 4).items():
        assert mask_clock(str(text), window)[1], name
    outside = {"released": MOMENT - timedelta(days=400), "day_after": MOMENT + timedelta(days=1)}
    for name, text in values(tmp_path, outside, 4).items():
        assert not mask_clock(str(text), window)[1], name


def test_a_date_alone_reads_as_its_day(tmp_path: Path) -> None:
    assert values(tmp_path, {"cutoff": date(2026, 2, 28)}, 2) == {"cutoff": "2026-02-28"}
    pickled = pickle.dumps({"cutoff": date(2026, 2, 28)}, protocol=4)
    assert pickled.count(b"\x07\xea\x02\x1c") == 1
    forged = tmp_path / "day.pkl"
    forged.write_bytes(pickled.replace(b"\x07\xea\x02\x1c", b"\x07\xea\x02\x1e"))  # February 30
    with pytest.raises(ValueError, match="pickled date"):
        read_pickle(forged)
