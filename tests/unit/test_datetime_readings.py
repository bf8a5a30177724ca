"""``datetime.now``, ``utcnow`` and ``today`` are recorded with the clocks of ``time``: a duration written
as ``(end - start).total_seconds()`` of two readings (papermill's, per cell and per notebook) is excused
by the run's own record, and a random number of its shape is not.

The guest edits the C type's own dict, for the whole process, so each recording check runs in a fresh
Python process: the type and value each reading returns stay those of the original, subclasses (pandas'
``Timestamp``) keep their own methods, and a platform that refuses the edit leaves the record marked
incomplete, never a failing job.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reprobox.guest import datetime_clock, readings_merge
from reprobox.runspecific import (
    DURATION_BY_NAME,
    DURATION_OF_CLOCK,
    RunContext,
    judge_value,
)
from reprobox.runspecific._durations import explains

ROOT = Path(__file__).parents[2]

RECORDING_JOB = """
import json, sys, time
from reprobox.guest import readings
recorder = readings.install(sys.argv[1])
import datetime as dt
from datetime import date, datetime, timezone

class Sub(datetime):  # a subclass with no now() of its own: the recorded one, called with Sub
    pass

def now():  # papermill's helper: every caller reads at this line
    return datetime.now(timezone.utc)

epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
start = now()
for _ in range(3):
    now()  # readings of the helper between the start and the end
time.sleep(0.3)
end = now()
time.sleep(0.05)  # the readings below lie apart from the duration's neighbourhood
local = datetime.now()  # naive, local time (TZ is set)
utc = datetime.utcnow()
today = datetime.today()
day = date.today()
sub = Sub.now(tz=timezone.utc)
try:
    datetime.now(1)
except TypeError as error:
    refused = str(error)
for _ in range(100):
    datetime.now(timezone.utc)  # a loop at one line: only its last reading is kept
import inspect, pickle
print(json.dumps({
    "duration": (end - start).total_seconds(),
    "aware": [(d - epoch) // dt.timedelta(microseconds=1) for d in (start, end)],
    "local": int(local.timestamp()) * 10**6 + local.microsecond,
    "utc": (utc.replace(tzinfo=timezone.utc) - epoch) // dt.timedelta(microseconds=1),
    "types": [type(v).__name__ for v in (start, local, utc, today, day, sub)],
    "refused": refused,
    "pickled": pickle.loads(pickle.dumps(datetime.now)) == datetime.now,
    "kind": type(datetime.now).__name__,
    "signature": str(inspect.signature(datetime.now)),
    "unrecorded": recorder.unrecorded,
}))
"""


def run_job(tmp_path: Path, script: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TZ": "America/New_York", **(env or {})}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def context(facts: dict[str, Any]) -> RunContext:
    return RunContext.from_record("/runs/j/r1", {"run_facts": {"readings": facts}})


def test_datetime_readings_are_recorded_as_the_clock_read_them(tmp_path: Path) -> None:
    out = run_job(tmp_path, RECORDING_JOB)
    assert out["types"] == ["datetime", "datetime", "datetime", "datetime", "date", "Sub"]
    assert out["refused"] == "tzinfo argument must be None or of a tzinfo subclass, not type 'int'"
    assert out["pickled"] and out["unrecorded"] == []
    assert out["kind"] == "method" and out["signature"] == "(tz=None)"

    facts = readings_merge.merged(tmp_path / ".reprobox")
    assert facts["unrecorded_clocks"] == [] and facts["dropped"] == 0
    clocks = {entry["clock"]: entry for entry in facts["clocks"]}
    local = clocks[datetime_clock.LOCAL]
    values = local["values"]
    assert set(out["aware"]) <= set(values)  # microseconds of the epoch, as the datetimes hold them
    assert out["local"] in values  # a naive now() read through the local offset
    assert clocks[datetime_clock.UTC]["values"] == [out["utc"]]
    assert local["skipped"] > 0  # the loop at one line, bounded as every clock is
    names = [local["site_names"][s] for s in local["sites"]]
    helper_line = RECORDING_JOB.splitlines().index("    return datetime.now(timezone.utc)") + 1
    start_line = RECORDING_JOB.splitlines().index("start = now()") + 1
    assert f"<string>:{helper_line} < <string>:{start_line}" in names  # the helper, told by its caller
    today_line = RECORDING_JOB.splitlines().index("day = date.today()") + 1
    time_sites = clocks["time"]["site_names"]
    assert f"<string>:{today_line}" in {time_sites[s] for s in clocks["time"]["sites"]}  # the job's line

    run = context(facts)
    assert run.clock is not None and run.clock.complete
    assert explains(run.clock, out["duration"], "duration") == DURATION_OF_CLOCK


def test_a_platform_that_refuses_leaves_the_record_incomplete_and_the_job_running(tmp_path: Path) -> None:
    refusing = "import sys; sys.modules['ctypes'] = None\n" + RECORDING_JOB
    out = run_job(tmp_path, refusing)
    assert out["types"][0] == "datetime" and out["unrecorded"] == [datetime_clock.UNWRAPPED]
    assert out["kind"] == "builtin_function_or_method"  # the original, untouched
    facts = readings_merge.merged(tmp_path / ".reprobox")
    assert facts["unrecorded_clocks"] == [datetime_clock.UNWRAPPED]
    assert not [e for e in facts["clocks"] if e["clock"] in datetime_clock.CLOCKS]
    run = context(facts)
    assert run.clock is not None and not run.clock.complete
    excuse = judge_value("metadata.papermill.duration", out["duration"], 0.25, run, run)
    assert excuse is not None and excuse.reason == DURATION_BY_NAME


PANDAS_JOB = """
import json, sys
from reprobox.guest import readings
readings.install(sys.argv[1])
from datetime import datetime
import pandas
stamp = pandas.Timestamp.now()
print(json.dumps({"type": type(stamp).__name__, "datetime": isinstance(stamp, datetime)}))
"""


def test_a_subclass_made_in_c_keeps_its_own_now_and_stays_a_datetime(tmp_path: Path) -> None:
    """pandas.Timestamp subclasses the C type: its own now() and isinstance are untouched. (Apart from
    the recording job: pandas' import reads the clock thousands of times, which crowds the durations.)"""
    pytest.importorskip("pandas")
    assert run_job(tmp_path, PANDAS_JOB) == {"type": "Timestamp", "datetime": True}


# --- judging by the record --------------------------------------------------------------------------

BASE_US = 1_795_000_000_000_000


def datetime_facts(offsets_us: list[int], sites: list[int]) -> dict[str, Any]:
    names = [f"engines.py:126 < engines.py:{line}" for line in (135, 226, 154, 258, 286)]
    entry = {
        "pid": 7,
        "clock": datetime_clock.LOCAL,
        "site_names": names,
        "sites": sites,
        "values": [BASE_US + o for o in offsets_us],
        "skipped": 0,
        "dropped": 0,
    }
    return {"clocks": [entry], "draws": [], "memory": [], "dropped": 0}


def papermill_run(cells: list[int]) -> tuple[RunContext, list[float]]:
    """A notebook's start, then per cell a start, a save and an end; the durations papermill writes."""
    offsets, sites, t = [0], [0], 0
    durations = []
    for took in cells:
        t += 1500
        start = t
        offsets += [start, start + 40]
        sites += [1, 2]
        t += took
        offsets.append(t)
        sites.append(3)
        durations.append((t - start) / 10**6)
    t += 900
    offsets.append(t)
    sites.append(4)
    durations.append(t / 10**6)
    return context(datetime_facts(offsets, sites)), durations


def test_a_difference_of_two_datetime_readings_is_a_duration_of_the_runs_clock() -> None:
    run_a, durations_a = papermill_run([26_938, 3_262_143, 15_827])
    run_b, durations_b = papermill_run([45_379, 2_890_957, 22_364])
    assert durations_a[1] == 3.262143  # as total_seconds() writes it
    for index, (a, b) in enumerate(zip(durations_a, durations_b, strict=True)):
        excuse = judge_value(f"cells.{index}.metadata.papermill.duration", a, b, run_a, run_b)
        assert excuse is not None and (excuse.reason, excuse.evidence) == (
            DURATION_OF_CLOCK,
            "the run's own record",
        )


def test_a_random_number_of_a_durations_shape_is_not_one() -> None:
    """The negative control: numbers drawn at random, written as total_seconds() writes a duration,
    with the same name, are not durations of the run's clock and stay differences."""
    run_a, _ = papermill_run([26_938, 3_262_143, 15_827])
    run_b, _ = papermill_run([45_379, 2_890_957, 22_364])
    draw = random.Random(20261129)
    for _ in range(200):
        a, b = (round(draw.uniform(0.02, 9.0), 6) for _ in range(2))
        assert judge_value("metadata.papermill.duration", a, b, run_a, run_b) is None, (a, b)
    one_off = judge_value("cells.1.metadata.papermill.duration", 3.262142, 2.890957, run_a, run_b)
    assert one_off is None  # a microsecond away from the reading's difference: not it


@pytest.mark.parametrize(("clock", "per_second"), [("time_ns", 10**9), ("datetime_us", 10**6)])
def test_whole_number_clocks_are_divided_as_a_script_divides(clock: str, per_second: int) -> None:
    start, end = 1_795_000_000 * per_second + 123, 1_795_000_003 * per_second + 987_654
    entry = {"pid": 7, "clock": clock, "site_names": ["a.py:1", "a.py:2"], "sites": [0, 1]}
    facts = {"clocks": [{**entry, "values": [start, end], "skipped": 0, "dropped": 0}], "dropped": 0}
    run = context(facts)
    assert run.clock is not None
    assert explains(run.clock, (end - start) / per_second) == DURATION_OF_CLOCK
