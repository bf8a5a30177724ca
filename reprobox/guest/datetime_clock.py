"""The job's readings of the wall clock through ``datetime``: ``datetime.now``, ``utcnow`` and ``today``
(and so ``date.today``), kept in the record of its clocks (``readings``) as the ``time`` functions are.

``now`` and ``utcnow`` read the system clock in C, where no wrapper of ``time`` sees them; a duration
written as ``(end - start).total_seconds()`` of two such readings (papermill's, per cell and per notebook)
is known only by them. ``datetime.datetime`` is a C type: replacing the module's name by a subclass
would break ``isinstance`` for the datetimes C code makes (pandas' ``Timestamp`` subclasses the C type)
and change reprs and pickles. So the classmethods in the type's own dict are replaced by recording ones
that call the originals and return what they return, and ``PyType_Modified`` (the C API's call for an
edited type) drops the lookups CPython cached for the type and its subclasses. A subclass with a
method of its own (``Timestamp.now``) keeps it. Where the platform refuses (no ``ctypes``, no
``pythonapi``, a type dict that is not found), nothing is replaced and the record names ``datetime`` in
``unrecorded``: a duration its readings would explain is then judged by its name, saying so.

``today`` is ``cls.fromtimestamp(time.time())`` in C: it is replaced by the same calls, so its
``time.time`` reading stays recorded at the job's own line rather than this module's.

A reading is kept as the datetime returned, and made at exit into what the clock read: microseconds of
the Unix epoch, an aware one by its own offset, a naive ``now()`` or ``today()`` as local time (its
``fold`` kept), ``utcnow()`` as UTC. Its site is the line that called and the line that called that one:
a helper read for every caller (papermill's ``def now(self): return datetime.now(timezone.utc)``) is
told apart by its callers, so a cell's end is measured from that cell's start, not the helper's latest
reading. The bounds are those of every clock (``readings.ClockLog``).

What the job sees is what the originals return, but for one thing: from Python 3.12, ``utcnow``'s
``DeprecationWarning`` is raised at the innermost Python frame, now the recording method's, so the
warnings filters see this module's line where they saw the job's.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # imported in every process that imports datetime: typing costs more than this
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any, Protocol

    class ClockLog(Protocol):
        """``readings.ClockLog`` (imported by it, so named here by its shape)."""

        def add(self, site: Any, value: Any) -> None: ...

    class Recorder(Protocol):
        """``readings.Recorder``: the logs of this process's clocks, and ``time``'s wrapped functions."""

        originals: dict[str, Callable[[], Any]]
        wrappers: dict[str, Callable[[], Any]]
        unrecorded: list[str]

        def log(self, name: str) -> ClockLog: ...


LOCAL = "datetime_us"
"""``now()`` and ``today()``: an aware reading by its offset, a naive one as local time."""
UTC = "utcnow_us"
"""``utcnow()``: naive, in UTC."""
CLOCKS = (LOCAL, UTC)
UNWRAPPED = "datetime"  # what the record names when the type could not be edited


def install(recorder: Recorder, module: ModuleType) -> None:
    """Replace ``datetime.now``, ``utcnow`` and ``date.today`` by recording ones, all or none."""
    try:
        datetime_type, date_type = module.datetime, module.date
        edits = [
            (datetime_type, "now", _reading(recorder.log(LOCAL), datetime_type, "now")),
            (datetime_type, "utcnow", _reading(recorder.log(UTC), datetime_type, "utcnow")),
            (date_type, "today", _today(recorder, datetime_type, date_type)),
        ]
        modified = _type_modified()
        dicts = [_own_dict(owner) for owner, _, _ in edits]
    except Exception:  # noqa: BLE001 - a platform that refuses: the record says so, the job runs on
        recorder.unrecorded.append(UNWRAPPED)
        return
    for (owner, name, wrapper), found in zip(edits, dicts, strict=True):
        found[name] = classmethod(wrapper)
        modified(owner)


def micros(value: object, utc: bool) -> int | None:
    """The microseconds of the Unix epoch a recorded datetime was made from (None: not a datetime)."""
    from datetime import datetime, timezone

    if not isinstance(value, datetime):
        return None
    try:  # as the base type: a subclass's own arithmetic takes no part
        plain = datetime(
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
            value.tzinfo,
            fold=value.fold,
        )
        if plain.utcoffset() is None:
            plain = plain.replace(tzinfo=timezone.utc) if utc else plain.astimezone(timezone.utc)
        delta = plain - datetime(1970, 1, 1, tzinfo=timezone.utc)
    except Exception:  # noqa: BLE001 - a tzinfo of the job's that fails: that reading is dropped
        return None
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _reading(log: ClockLog, owner: type, name: str) -> Callable[..., Any]:
    original = _callable(owner.__dict__[name])
    add = log.add
    frame = sys._getframe

    def reading(cls: type, *args: Any, **kwargs: Any) -> Any:
        value = original(cls, *args, **kwargs)
        try:
            caller = frame(1)
        except ValueError:  # called with no Python frame above (from C, at a thread's top)
            add(None, value)
            return value
        outer = caller.f_back  # instructions, not lines: a line's number costs a walk of its table
        if outer is None:
            add((caller.f_code, caller.f_lasti, None, -1), value)
        else:
            add((caller.f_code, caller.f_lasti, outer.f_code, outer.f_lasti), value)
        return value

    return _named(reading, owner, name)


def _today(recorder: Recorder, datetime_type: type, date_type: type) -> Callable[..., Any]:
    """``date_today`` of CPython's ``_datetimemodule.c``: ``cls.fromtimestamp(time.time())``, with
    ``time.time`` looked up at the call; where it is this record's wrapper, its reading is kept at the
    job's line. A datetime it returns is a reading of the local clock too."""
    import time

    add_time, raw_time = recorder.log("time").add, recorder.originals["time"]
    wrapped = recorder.wrappers["time"]
    add = recorder.log(LOCAL).add
    frame = sys._getframe

    def today(cls: type) -> Any:
        clock = time.time
        try:
            caller = frame(1)
        except ValueError:
            caller = None
        if clock is wrapped:
            seconds = raw_time()
            add_time((caller.f_code, caller.f_lineno) if caller is not None else None, seconds)
        else:
            seconds = clock()
        value = cls.fromtimestamp(seconds)  # type: ignore[attr-defined]
        if isinstance(value, datetime_type):
            outer = caller.f_back if caller is not None else None
            if caller is None:
                add(None, value)
            elif outer is None:
                add((caller.f_code, caller.f_lasti, None, -1), value)
            else:
                add((caller.f_code, caller.f_lasti, outer.f_code, outer.f_lasti), value)
        return value

    return _named(today, date_type, "today")


def site_name(site: tuple[Any, int, Any, int]) -> str:
    """``file:line < file:line``: the line that read, and the line that called it (sites are kept as
    instructions, ``f_lasti``, and named at exit)."""
    names = [f"{code.co_filename}:{_line(code, index)}" for code, index in (site[:2], site[2:]) if code]
    return " < ".join(names)


def _line(code: Any, index: int) -> int | None:
    for start, end, line in code.co_lines():
        if start <= index < end:
            return line  # type: ignore[no-any-return]
    return None


def _callable(found: Any) -> Callable[..., Any]:
    """The class method as a callable taking the class first (C's descriptor is one already)."""
    return found.__func__ if isinstance(found, classmethod) else found


def _named(wrapper: Callable[..., Any], owner: type, name: str) -> Callable[..., Any]:
    original = owner.__dict__[name]
    wrapper.__name__ = name
    wrapper.__qualname__ = f"{owner.__name__}.{name}"
    wrapper.__module__ = owner.__module__
    wrapper.__doc__ = getattr(original, "__doc__", None)
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper


def _own_dict(owner: type) -> dict[str, Any]:
    """The type's own dict, which ``owner.__dict__`` shows read-only."""
    import gc

    shown = owner.__dict__
    found = gc.get_referents(shown)
    if len(found) != 1 or not isinstance(found[0], dict) or found[0].keys() != shown.keys():
        raise TypeError(f"no dict of its own found for {owner!r}")
    return found[0]


def _type_modified() -> Callable[[type], None]:
    import ctypes

    prototype = ctypes.PYFUNCTYPE(None, ctypes.py_object)
    return prototype(("PyType_Modified", ctypes.pythonapi))
