"""An executed Jupyter notebook (nbconvert's or papermill's output) is one JSON document, and is read as
one: its cells' outputs, execution counts and metadata are values by dotted name, so a changed output is
named by its cell and the executor's stamps are judged as the values they are, not as lines of text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reprobox import compare
from reprobox.guest.hashing import _readers
from tests.unit.test_verdicts import WINDOWS, two_runs


def executed(stamp: str, score: str) -> dict[str, Any]:
    """A notebook as nbclient writes it after a run: one code cell, its output and its stamps."""
    return {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 1,
                "id": "cell-1",
                "metadata": {"execution": {"iopub.status.busy": stamp, "shell.execute_reply": stamp}},
                "outputs": [{"name": "stdout", "output_type": "stream", "text": [f"accuracy {score}\n"]}],
                "source": ["print(f'accuracy {clf.score(X, y)}')"],
            }
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def write_notebook(out: Path, stamp: str, score: str) -> None:
    (out / "executed.ipynb").write_text(json.dumps(executed(stamp, score), indent=1))


def test_a_notebook_is_read_as_json_values(tmp_path: Path) -> None:
    write_notebook(tmp_path, "2026-11-23T12:00:30.000Z", "0.93")
    assert _readers.format_of(tmp_path / "executed.ipynb") == "json"
    values = _readers.load(tmp_path / "executed.ipynb")[1]
    assert values["cells.0.outputs.0.text"] == ["accuracy 0.93\n"]
    assert values["cells.0.execution_count"] == 1
    content = _readers.plan(tmp_path / "executed.ipynb")
    assert content.layout is not None and content.layout.whole_file


def test_the_executors_stamps_are_readings_of_each_runs_clock(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        inside = WINDOWS["ab"[run]][0].replace("00.000+00:00", "30.000Z")
        write_notebook(out, inside, "0.93")

    result = two_runs(tmp_path, write)
    assert result.grade == compare.REPRODUCED, result.sentence
    assert {item["name"] for item in result.run_specific} == {
        "cells.0.metadata.execution.iopub.status.busy",
        "cells.0.metadata.execution.shell.execute_reply",
    }


def test_a_changed_output_is_named_by_its_cell(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        write_notebook(out, WINDOWS["ab"[run]][0].replace("00.000+00:00", "30.000Z"), ["0.93", "0.91"][run])

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NOT_REPRODUCIBLE
    (difference,) = result.value_differences
    assert (difference["checkpoint"], difference["name"]) == ("executed.ipynb", "cells.0.outputs.0.text")
    assert "accuracy 0.93" in str(difference["a"]) and "accuracy 0.91" in str(difference["b"])
    assert "cells.0.outputs.0.text" in result.sentence
