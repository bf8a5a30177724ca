"""A clock reading moved by a number written at its call site, known by the record as the script held it.

gensim times each epoch from ``start = default_timer() - 0.00001`` and sums the epochs' durations into
``total_train_time``: each is a difference of two readings plus 10 us, which the record explains only
once it knows the constant its code added. Controls: the same durations without the recorded constants,
and a duration moved by a constant that no call site adds.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from reprobox.guest import readings_merge
from reprobox.guest.clock_offsets import site_offsets
from reprobox.runspecific import DURATION_OF_CLOCK, SERIES_SUM, RunContext
from reprobox.runspecific._durations import explains

JOB = """\
import json, sys, time
from reprobox.guest import readings
readings.install(sys.argv[1])
total = 0


def epoch():
    start, report = time.perf_counter() - 0.00001, 1.0
    sum(range(20000))
    return time.perf_counter() - start


for _ in range(5):
    total += epoch()
plain = time.perf_counter()
sum(range(20000))
plain = time.perf_counter() - plain
print(json.dumps({"epoch": epoch(), "total": total, "plain": plain}))
"""

FORMS = """\
import time
def forms():
    a = time.time() + 5
    b = 3 + time.time_ns()
    c = time.perf_counter() - -1e-5
    d = time.perf_counter() * 1000
    e = time.time() - time.monotonic()
    f = time.time() - a
    g = time.time() - True
"""


def context(facts: dict[str, Any]) -> RunContext:
    return RunContext.from_record("/runs/j/r1", {"run_facts": {"readings": facts}})


def test_a_reading_moved_by_a_constant_at_its_call_site_explains_a_duration(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    job = [sys.executable, str(tmp_path / "job.py"), str(tmp_path)]
    out = subprocess.run(job, env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    values = json.loads(out.stdout)
    facts = readings_merge.merged(tmp_path / ".reprobox")
    (clock,) = facts["clocks"]
    assert list(clock["site_offsets"].values()) == [-1e-05]  # one site, however often it was read
    record = context(facts).clock
    assert record is not None
    assert explains(record, values["epoch"]) == DURATION_OF_CLOCK
    assert explains(record, values["total"]) == SERIES_SUM
    assert explains(record, values["plain"]) == DURATION_OF_CLOCK
    # a duration moved by a constant no call site adds is no duration of the run
    assert explains(record, values["plain"] + 0.00001) is None
    # and without the constant the record holds, the moved readings explain nothing
    unmoved = context({**facts, "clocks": [{**clock, "site_offsets": {}}]}).clock
    assert unmoved is not None
    assert explains(unmoved, values["epoch"]) is None and explains(unmoved, values["total"]) is None


def test_only_a_number_added_or_subtracted_at_the_call_is_recorded(tmp_path: Path) -> None:
    (tmp_path / "forms.py").write_text(FORMS)
    spec = importlib.util.spec_from_file_location("forms", tmp_path / "forms.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    code = module.forms.__code__
    found = site_offsets([((code, line), line) for line in range(3, 10)])
    # a scale changes the unit, two calls on one line are ambiguous, a name and a bool are no number
    assert found == {"3": 5, "4": 3, "5": 1e-05}
    # source that is not the code that ran (edited since) records nothing
    (tmp_path / "forms.py").write_text(FORMS.replace("time.time() + 5", "time.time() + 50"))
    assert site_offsets([((code, 3), 0)]) == {}
