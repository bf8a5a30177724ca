"""The facts that make a run itself, recorded by the guest for the verdict's evidence: the job's
wall-clock window as its own clock read it, the local UTC offsets in force (a job stamps
``datetime.now()`` in local time), the host names, the pids of its processes, its run id and folders, and
what its Python read of its clocks, drew from the OS's entropy and mapped in memory (``readings``).

A value the job saved is excused as run-specific only when these facts explain it (``runspecific``):
a stamp inside the window, a pid of this run, this host's name.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from reprobox.guest import settings
from reprobox.timestamps import parse_utc, utc_stamp

FOLDER_VARIABLES = (settings.RUN_DIR, settings.OUTPUT_DIR, settings.CODE_DIR, "TMPDIR")


def record(
    env: Mapping[str, str],
    child_env: Mapping[str, str],
    *,
    started_at: str,
    ended_at: str,
    pids: list[int],
    folders: list[Path | None],
    recorded: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The run's facts; the window in the job's clock (shifted where `--vary clock` shifts it);
    ``recorded``: what the job's processes read of their clocks, drew and mapped (``readings_merge``)."""
    shift = _clock_shift(env)
    start, end = (parse_utc(started_at) or time.time()) + shift, (parse_utc(ended_at) or time.time()) + shift
    named = [child_env.get(name) for name in FOLDER_VARIABLES]
    return {
        "clock": {
            "start": utc_stamp(start),
            "end": utc_stamp(end),
            "utc_offsets": utc_offsets(child_env.get("TZ"), (start, end)),
            "shift_s": shift,
        },
        "hostnames": hostnames(),
        "pids": pids,
        "run_id": env.get(settings.RUN_ID),
        "folders": sorted({str(f) for f in (*folders, *named) if f and str(f).startswith("/")}),
        **({"readings": dict(recorded)} if recorded is not None else {}),
    }


def _clock_shift(env: Mapping[str, str]) -> float:
    try:
        return float(env.get(settings.CLOCK_OFFSET) or 0)
    except ValueError:
        return 0.0


def hostnames() -> list[str]:
    """This host's name, as gethostname() and platform.node() say it (on Linux both are uname's)."""
    name = os.uname().nodename
    return [name] if name else []


def utc_offsets(tz: str | None, instants: tuple[float, ...]) -> list[int]:
    """The local UTC offsets (seconds) at these instants in the job's time zone (its TZ, else ours)."""
    with _time_zone(tz):
        return sorted({time.localtime(t).tm_gmtoff for t in instants})


@contextlib.contextmanager
def _time_zone(tz: str | None) -> Iterator[None]:
    saved = os.environ.get("TZ")
    if tz == saved:
        yield
        return
    try:
        if tz is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = tz
        time.tzset()
        yield
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()
