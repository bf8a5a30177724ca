"""A ``.json`` file that holds JSON Lines (one JSON value a line) is read as JSON Lines, not compared as
bytes: loggers write their records so under a ``.json`` name (bayesian-optimization's ``JSONLogger``
appends one object per step to ``logs.json``; detectron2's ``metrics.json`` is the same). Its rows are
values by row and field, so a changed target is named where it is and each line's clock record is judged
as the value it is. What is neither one document nor one per line stays bytes."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from reprobox import compare
from reprobox.guest.hashing import _readers
from tests.unit.test_verdicts import WINDOWS, two_runs


def step(target: float, stamp: str) -> dict[str, object]:
    """One line as bayes_opt's JSONLogger writes it after a probe."""
    return {"target": target, "params": {"x": 0.5, "y": -1.25}, "datetime": {"datetime": stamp}}


def write_log(out: Path, targets: list[float], stamp: str) -> None:
    lines = [json.dumps(step(target, stamp)) for target in targets]
    (out / "logs.json").write_text("\n".join(lines) + "\n")


def stamp_inside(run: int) -> str:
    """A ``datetime.now().strftime("%Y-%m-%d %H:%M:%S")`` half a minute into the run's window."""
    start = datetime.fromisoformat(WINDOWS["ab"[run]][0])
    return (start + timedelta(seconds=30)).strftime("%Y-%m-%d %H:%M:%S")


def test_json_lines_under_a_json_name_are_read_row_by_row(tmp_path: Path) -> None:
    write_log(tmp_path, [-7.1, -3.5], "2026-11-23 12:00:30")
    values = _readers.load(tmp_path / "logs.json")[1]
    assert values["0.target"] == -7.1 and values["1.target"] == -3.5
    assert values["1.params.y"] == -1.25
    assert values["1.datetime.datetime"] == "2026-11-23 12:00:30"
    content = _readers.plan(tmp_path / "logs.json")
    assert content.values_only and content.reader == "json parser"


def test_a_changed_target_is_named_by_its_row(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        write_log(out, [-7.1, [-3.5, -3.25][run]], stamp_inside(run))

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE
    (difference,) = result.value_differences
    assert (difference["checkpoint"], difference["name"]) == ("logs.json", "1.target")
    assert (difference["a"], difference["b"]) == (-3.5, -3.25)


def test_each_lines_clock_reading_is_judged_by_the_runs_window(tmp_path: Path) -> None:
    result = two_runs(tmp_path, lambda out, run: write_log(out, [-7.1, -3.5], stamp_inside(run)))
    assert result.grade == compare.REPRODUCED, result.sentence
    assert {item["name"] for item in result.run_specific} == {"0.datetime.datetime", "1.datetime.datetime"}


def test_one_json_document_is_still_read_as_one(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(json.dumps({"global_step": 30, "best": {"loss": 0.5}}, indent=1))
    assert _readers.load(tmp_path / "state.json")[1] == {"global_step": 30, "best.loss": 0.5}


def test_text_that_is_neither_stays_bytes(tmp_path: Path) -> None:
    for name, text in {
        "two_documents.json": json.dumps({"a": 1}, indent=1) + "\n" + json.dumps({"a": 2}, indent=1),
        "one_bad_line.json": '{"a": 1}\n{"a": 2\n',
        "not_json.json": "loss 0.5\n",
    }.items():
        (tmp_path / name).write_text(text)
        content = _readers.plan(tmp_path / name)
        assert not content.values_only, name
        assert "compared as bytes" in str(content.note), name
