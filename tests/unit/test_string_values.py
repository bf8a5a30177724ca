"""A string value of a structured file judged token by token, as a line of text is, by the run's record.

gensim pickles its training event's message, ``training on 145 raw words (17 effective words) took 0.0s,
1222 effective words/s``: ``%.0f`` of 17 words over the training's duration, measured from a start 10 us
early. The rate is a count written beside it over a difference of the run's readings; alone it is too
coarse to test against a record that reads the clock often, but in both runs it is that figure of the
same two call sites. Controls: a random number in its place, and a differing word beside it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from reprobox import compare
from reprobox.records.manifest import RunRecord
from reprobox.runspecific import RATE_OF_CLOCK, UNTESTABLE, RunContext, judge_value
from reprobox.runspecific._durations import explains
from reprobox.timestamps import utc_stamp
from tests.unit.test_prose_values import recorded

START = 1_764_290_247.0
SITES = ["word2vec.py:1065", "word2vec.py:1284", "word2vec.py:1303", "word2vec.py:1310", "word2vec.py:1090"]
MESSAGE = "training on 145 raw words (17 effective words) took 0.0s, {} effective words/s"


def facts(seed: int) -> tuple[dict[str, Any], float]:
    """A training loop's record of ``perf_counter`` (a start, five epochs each read at its start, a dozen
    times in its progress loop and at its end, then the end), and the whole training's duration."""
    rng = random.Random(seed)
    t = 1000.0 + rng.random()
    sites, values = [0], [t]
    for _ in range(5):
        for site, times in ((1, 1), (2, rng.randint(8, 12)), (3, 1)):
            for _ in range(times):
                t += rng.uniform(5e-5, 3e-4)
                sites.append(site)
                values.append(t)
    sites.append(4)
    values.append(t + rng.uniform(1e-5, 5e-5))
    entry = {"pid": 7, "clock": "perf_counter", "site_names": SITES, "sites": sites, "values": values}
    readings = {"clocks": [{**entry, "skipped": 0, "dropped": 0}], "dropped": 0}
    window = {"start": utc_stamp(START), "end": utc_stamp(START + 60)}
    return {"readings": readings, "clock": window}, values[-1] - values[0]


def make_run(root: Path, run_id: str, run_facts: dict[str, Any], message: str) -> RunRecord:
    outputs = root / "runs" / "job" / run_id / "outputs"
    outputs.mkdir(parents=True)
    (outputs / "events.json").write_text(json.dumps({"events": [{"event": "train", "msg": message}]}))
    return recorded(outputs, run_facts)


def test_a_rate_in_a_string_value_is_judged_by_the_runs_record(tmp_path: Path) -> None:
    (facts_a, took_a), (facts_b, took_b) = facts(1), facts(2)
    rate_a, rate_b = round(17 / took_a), round(17 / took_b)
    run_a = make_run(tmp_path, "r0", facts_a, MESSAGE.format(rate_a))
    run_b = make_run(tmp_path, "r1", facts_b, MESSAGE.format(rate_b))
    result = compare.compare_runs([run_a, run_b])
    assert result.grade == compare.REPRODUCED, result.sentence
    (entry,) = result.run_specific
    assert entry["name"] == "events.0.msg" and entry["evidence"] == "the run's own record"
    assert entry["reason"].startswith(f"in its text, {rate_a} vs {rate_b}: {RATE_OF_CLOCK}")

    # the controls: a random number where the rate stands, and a differing word beside the rate
    for control, message in enumerate(
        (MESSAGE.format(random.Random(3).randint(rate_b + 100, rate_b + 900)), "validating on 145 raw words")
    ):
        other = make_run(tmp_path, f"c{control}", facts_b, message)
        result = compare.compare_runs([run_a, other])
        assert result.grade == compare.NOT_REPRODUCIBLE, message
        assert [d["name"] for d in result.value_differences] == ["events.0.msg"]


def test_a_rate_too_coarse_for_each_run_alone_is_explained_at_one_place_in_both() -> None:
    (facts_a, took_a), (facts_b, took_b) = facts(1), facts(2)
    run_a = RunContext.from_record("/runs/j/r0", {"run_facts": facts_a})
    run_b = RunContext.from_record("/runs/j/r1", {"run_facts": facts_b})
    rate_a, rate_b = round(17 / took_a), round(17 / took_b)
    assert run_a.clock is not None and run_b.clock is not None
    assert explains(run_a.clock, rate_a, counts=[17, 145]) == UNTESTABLE  # many differences lie near
    excuse = judge_value("", rate_a, rate_b, run_a, run_b, counts=[17, 145])
    assert excuse is not None and excuse.reason.startswith(RATE_OF_CLOCK)
    # one unit off in either run is no such rate, nor is the right rate over a count not written beside it
    assert judge_value("", rate_a + 1, rate_b, run_a, run_b, counts=[17, 145]) is None
    assert judge_value("", rate_a, rate_b - 1, run_a, run_b, counts=[17, 145]) is None
    assert judge_value("", rate_a, rate_b, run_a, run_b, counts=[16, 145]) is None
