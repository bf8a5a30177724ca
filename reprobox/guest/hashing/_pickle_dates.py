"""Dates and times as Python's ``datetime`` pickles them, read as the ISO 8601 text they stand for.

``datetime.datetime`` and ``datetime.date`` pickle their fields packed into bytes
(``datetime(b'\\x07\\xea\\x0b\\x1d...')``, then a tzinfo). Kept as a stand-in, a stamp would be those
bytes, which no record of a run's clock can explain: Hyperopt's ``Trials`` keep a ``book_time`` and a
``refresh_time`` per trial that way. Read here, a datetime is its ``isoformat()`` text, with its UTC offset
when its tzinfo is a fixed ``datetime.timezone``, so it is judged like any timestamp a job writes (a
reading inside the run's window, or a real value). The fields are unpacked here and checked by
``datetime``'s own constructor: nothing the pickle names is called, and bytes that hold no valid date are
refused.
"""

from __future__ import annotations

import datetime

from reprobox.guest.hashing._pickle_objects import CLASS_KEY, _StandIn

_DATE_BYTES = 4  # year (two bytes, big-endian), month, day
_DATETIME_BYTES = 10  # then hour, minute, second, microsecond (three bytes, big-endian)
_FOLD = 0x80  # set in the month's byte for the second of two equal wall times (protocol 4 and later)


def make_date(state: object, *rest: object) -> str:
    """``datetime.date(packed)``: the date as ``YYYY-MM-DD``."""
    data = _packed(state, _DATE_BYTES, "date", rest)
    try:
        return datetime.date(data[0] << 8 | data[1], data[2], data[3]).isoformat()
    except ValueError as error:
        raise ValueError(f"a pickled date holds no valid date ({error})") from None


def make_datetime(state: object, tzinfo: object = None, *rest: object) -> str | dict[str, object]:
    """``datetime.datetime(packed[, tzinfo])``: its ISO 8601 text. Where that text would leave out a
    field (a tzinfo that is not a fixed offset, such as a named zone; the fold of a repeated wall time),
    a mapping of the text (``wall``) and what it leaves out, as the pickle gave it."""
    data = _packed(state, _DATETIME_BYTES, "datetime", rest)
    try:
        moment = datetime.datetime(
            data[0] << 8 | data[1],
            data[2] & ~_FOLD,
            data[3],
            data[4],
            data[5],
            data[6],
            data[7] << 16 | data[8] << 8 | data[9],
            fold=1 if data[2] & _FOLD else 0,
        )
    except ValueError as error:
        raise ValueError(f"a pickled datetime holds no valid time ({error})") from None
    offset = None if tzinfo is None else _fixed_offset(tzinfo)
    text = moment.replace(tzinfo=offset).isoformat()
    if not moment.fold and (tzinfo is None or offset is not None):
        return text
    spelled: dict[str, object] = {CLASS_KEY: "datetime.datetime", "wall": text}  # what the text omits
    if moment.fold:
        spelled["fold"] = 1
    if tzinfo is not None and offset is None:
        spelled["tzinfo"] = tzinfo
    return spelled


def _packed(state: object, size: int, what: str, rest: tuple[object, ...]) -> bytes:
    if rest or not isinstance(state, bytes) or len(state) != size:
        raise ValueError(f"a pickled {what} is not its {size} packed bytes")
    return state


def _fixed_offset(tzinfo: object) -> datetime.timezone | None:
    """A ``datetime.timezone(timedelta(days, seconds, microseconds)[, name])`` stand-in as the real
    fixed offset; None for any other tzinfo (pytz's, zoneinfo's), or one whose fields do not check."""
    zone = _stand_in_named(tzinfo, "datetime.timezone")
    if zone is None or not 1 <= len(zone._rb_args) <= 2 or zone._rb_kwargs:
        return None
    delta = _stand_in_named(zone._rb_args[0], "datetime.timedelta")
    if delta is None or delta._rb_kwargs or not all(type(v) is int for v in delta._rb_args):
        return None
    name = zone._rb_args[1] if len(zone._rb_args) == 2 else None
    if name is not None and not isinstance(name, str):
        return None
    try:
        offset = datetime.timedelta(*delta._rb_args)  # type: ignore[arg-type]
        return datetime.timezone(offset) if name is None else datetime.timezone(offset, name)
    except (TypeError, ValueError, OverflowError):
        return None


def _stand_in_named(value: object, name: str) -> _StandIn | None:
    return value if isinstance(value, _StandIn) and value.rb_name == name else None
