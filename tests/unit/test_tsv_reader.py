"""Tab-separated tables (CatBoost's ``catboost_info/time_left.tsv`` and ``learn_error.tsv``) are read as
tables, like a CSV: each value named ``<row>.<column>`` by its header, within the CSV reader's bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobox import compare
from reprobox.guest.hashing import _readers
from reprobox.guest.hashing._bounds import OverLimit
from reprobox.guest.hashing._textbounds import MAX_TEXT_VALUES
from tests.unit.test_verdicts import two_runs

TIME_LEFT = "iter\tPassed\tRemaining\n0\t3.1\t310\n1\t6.2\t305\n"
LEARN_ERROR = "iter\tLogloss\n0\t0.6712\n1\t0.6508\n"


def test_catboost_tables_are_read_by_column_name(tmp_path: Path) -> None:
    info = tmp_path / "catboost_info"
    info.mkdir()
    (info / "time_left.tsv").write_text(TIME_LEFT)
    (info / "learn_error.tsv").write_text(LEARN_ERROR)
    assert _readers.format_of(info / "time_left.tsv") == "tsv"
    _tensors, values = _readers.load(info / "time_left.tsv")
    assert values == {
        "0.iter": "0", "0.Passed": "3.1", "0.Remaining": "310",
        "1.iter": "1", "1.Passed": "6.2", "1.Remaining": "305",
    }  # fmt: skip
    assert _readers.load(info / "learn_error.tsv")[1]["1.Logloss"] == "0.6508"
    content = _readers.plan(info / "learn_error.tsv")
    assert content.format == "tsv" and content.layout is not None and content.layout.whole_file


def test_a_tab_file_is_a_table_too_and_a_comma_inside_a_cell_is_no_delimiter(tmp_path: Path) -> None:
    path = tmp_path / "scores.tab"
    path.write_text("name\tscore\nbase, small\t0.5\n")
    assert _readers.load(path)[1] == {"0.name": "base, small", "0.score": "0.5"}


def test_a_changed_loss_in_learn_error_is_named_by_its_column(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        (out / "learn_error.tsv").write_text(LEARN_ERROR.replace("0.6508", ["0.6508", "0.6511"][run]))

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert {"checkpoint": "learn_error.tsv", "name": "1.Logloss", "a": "0.6508", "b": "0.6511"} in (
        result.value_differences
    )


def test_a_tsv_past_the_value_limit_is_refused_as_a_csv_is(tmp_path: Path) -> None:
    path = tmp_path / "huge.tsv"
    path.write_text("a\tb\n" + "1\t2\n" * (MAX_TEXT_VALUES // 2 + 1))
    with pytest.raises(OverLimit, match="more than the limit"):
        _readers.load(path)
