"""Numbers, stamps and ids inside lines of prose, judged by the run's own record as structured values are.

sentence-transformers' model card writes ``- **Training**: 0.5 seconds`` (``time.time()`` minus the start,
to tenths); logs write ``Epoch 3 took 12.41s`` or a stamp and a run id. A pair of lines that differs only
in such tokens is excused token by token: a duration by the record of the run's clocks (by the words
around it only where the record is too coarse to test it), a stamp by the run's clock window, an id by
its entropy draws. Controls: a number the record refutes, a loss beside words of time, a differing word.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from reprobox import compare
from reprobox.compare._prose import judge_line
from reprobox.guest import hashing
from reprobox.records.manifest import RunRecord
from reprobox.runspecific import (
    DURATION_COARSE,
    DURATION_OF_CLOCK,
    RANDOM_ID,
    TIMESTAMP,
    UNTESTABLE,
    RunContext,
    judge_value,
)
from reprobox.runspecific._durations import explains
from reprobox.timestamps import utc_stamp

START = 1_764_290_247.0  # 2025-11-28 00:37:27 UTC: the runs' windows open here, 60 s long
SITES = ["import.py:3", "model_card.py:192", "trainer.py:2480", "model_card.py:1921"]


def readings(training: float, steps: int = 0, draws: tuple[bytes, ...] = ()) -> dict[str, Any]:
    """A trainer's record of its clock: a reading at import, 3 s later the card's start, ``steps`` readings
    in the training loop, and the card's end ``training`` seconds after its start."""
    start = START + 3.0
    values = [
        START,
        start,
        *(start + training * (i + 1) / (steps + 1) for i in range(steps)),
        start + training,
    ]
    sites = [0, 1, *([2] * steps), 3]
    entry = {"pid": 7, "clock": "time", "site_names": SITES, "sites": sites, "values": values}
    return {
        "clocks": [{**entry, "skipped": 0, "dropped": 0}],
        "draws": [d.hex() for d in draws],
        "dropped": 0,
    }


def facts(training: float, steps: int = 0, draws: tuple[bytes, ...] = ()) -> dict[str, Any]:
    clock = {"start": utc_stamp(START), "end": utc_stamp(START + 60)}
    return {"readings": readings(training, steps, draws), "clock": clock}


def run(training: float, steps: int = 0, draws: tuple[bytes, ...] = ()) -> RunContext:
    return RunContext.from_record("/runs/j/r1", {"run_facts": facts(training, steps, draws)})


def card(seconds: str, accuracy: str = "0.9371") -> str:
    return (
        f"# A model\n\n- **Accuracy**: {accuracy}\n\n### Training Time\n- **Training**: {seconds} seconds\n"
    )


def test_a_rounded_duration_in_prose_is_a_duration_of_the_runs_clock() -> None:
    run_a, run_b = run(0.54), run(0.61)  # few readings: a tenth of a second is testable
    (token,) = judge_line("- **Training**: 0.5 seconds", "- **Training**: 0.6 seconds", run_a, run_b) or []
    assert (token.a, token.b, token.words) == ("0.5", "0.6", "Training seconds")
    assert (token.excuse.reason, token.excuse.evidence) == (DURATION_OF_CLOCK, "the run's own record")
    # the control: a number with testable digits that the record refutes stays a difference, whatever
    # the words say (a tenth of a second the record cannot refute, 0.9, would be judged by the words)
    assert judge_line("- **Training**: 0.5 seconds", "- **Training**: 12.345 seconds", run_a, run_b) is None


def test_a_duration_too_coarse_for_the_record_is_judged_by_its_words() -> None:
    run_a, run_b = run(0.54, steps=200), run(0.61, steps=200)  # a reading every few ms: tenths are dense
    assert run_a.clock is not None and explains(run_a.clock, 0.5) == UNTESTABLE
    (token,) = judge_line("- **Training**: 0.5 seconds", "- **Training**: 0.6 seconds", run_a, run_b) or []
    assert (token.excuse.reason, token.excuse.evidence) == (DURATION_COARSE, "its name")
    # the same numbers under words that name no duration are not excused by them
    assert judge_line("- **Batches**: 0.5 per row", "- **Batches**: 0.6 per row", run_a, run_b) is None
    # a value its own run's record refutes is no duration of that run, however coarse the other run's is
    # (a line of prose or a saved value alike)
    assert judge_line("- **Training**: 0.5 seconds", "- **Training**: 12.345 seconds", run_a, run_b) is None
    assert judge_value("epoch_time", 0.5, 12.345, run_a, run_b) is None
    assert judge_value("epoch_time", 0.5, 0.6, run_a, run_b) is not None


def test_a_stamp_in_a_log_line_is_excused_by_the_window() -> None:
    run_a, run_b = run(0.54, steps=200), run(0.61, steps=200)
    line_a = "2025-11-28 00:37:31,512 INFO epoch 3 took 0.5 s"
    line_b = "2025-11-28 00:37:32,104 INFO epoch 3 took 0.6 s"
    stamp, took = judge_line(line_a, line_b, run_a, run_b) or [None, None]
    assert stamp is not None and (stamp.a, stamp.excuse.reason) == ("2025-11-28 00:37:31,512", TIMESTAMP)
    assert stamp.excuse.evidence == "the run's own record"
    assert took is not None and (took.words, took.excuse.reason) == ("took seconds", DURATION_COARSE)
    # a stamp outside the window (another day) is a real value
    assert judge_line(line_a, line_b.replace("2025-11-28", "2025-11-21"), run_a, run_b) is None


def test_a_loss_in_prose_is_never_excused_beside_words_of_time() -> None:
    run_a, run_b = run(0.4821), run(0.4907)  # each loss is, to the digit, a duration of its own run
    excuse = judge_value("", 0.4821, 0.4907, run_a, run_b)
    assert excuse is not None and excuse.reason == DURATION_OF_CLOCK  # unnamed, the record would excuse it
    lines = ("epoch 3 took 0.5 s, train loss {}", "- **Training time and loss**: {}", "loss {} (time: 3.1 s)")
    for line in lines:
        assert judge_line(line.format("0.4821"), line.format("0.4907"), run_a, run_b) is None, line


def test_a_differing_word_keeps_the_line_a_difference() -> None:
    run_a, run_b = run(0.54, steps=200), run(0.61, steps=200)
    assert judge_line("epoch 3 took 0.5 s on cpu", "epoch 3 took 0.6 s on cpu", run_a, run_b)
    assert judge_line("epoch 3 took 0.5 s on cpu", "epoch 3 took 0.6 s on gpu", run_a, run_b) is None
    assert judge_line("epoch 3 took 0.5 s", "epoch 3 took 0.6 s, 2 retries", run_a, run_b) is None


def test_ids_and_clock_layouts_in_prose() -> None:
    drawn_a, drawn_b = os.urandom(16), os.urandom(16)
    run_a, run_b = run(3.21, draws=(drawn_a,)), run(3.48, draws=(drawn_b,))
    (token,) = judge_line(f"run {drawn_a.hex()[:12]}", f"run {drawn_b.hex()[:12]}", run_a, run_b) or []
    assert (token.excuse.reason, token.excuse.evidence) == (RANDOM_ID, "the run's own record")
    assert judge_line(f"run {drawn_a.hex()[:12]}", f"run {os.urandom(6).hex()}", run_a, run_b) is None
    (token,) = judge_line("finished in 0:00:03.2", "finished in 0:00:03.5", run_a, run_b) or []
    assert (token.words, token.excuse.reason) == ("finished in seconds", DURATION_OF_CLOCK)


def make_run(root: Path, run_id: str, run_facts: dict[str, Any], text: str) -> RunRecord:
    outputs = root / "runs" / "job" / run_id / "outputs"
    outputs.mkdir(parents=True)
    (outputs / "README.md").write_text(text)
    return recorded(outputs, run_facts)


def recorded(outputs: Path, run_facts: dict[str, Any]) -> RunRecord:
    """The record of a succeeded run whose outputs are already written, with the given run facts."""
    record = {
        "run_id": outputs.parent.name,
        "status": "succeeded",
        "job": {},
        "run_facts": run_facts,
        "checkpoints": [d.to_json() for d in hashing.hash_outputs(outputs, [])],
    }
    return RunRecord(outputs.parent.resolve(), record)


def test_a_model_cards_training_time_is_listed_token_by_token(tmp_path: Path) -> None:
    runs = [
        make_run(tmp_path, "r0", facts(0.54, steps=200), card("0.5")),
        make_run(tmp_path, "r1", facts(0.61, steps=200), card("0.6")),
    ]
    result = compare.compare_runs(runs)
    assert result.grade == compare.REPRODUCED, result.sentence
    (entry,) = result.run_specific
    assert entry["name"] == "line 6" and entry["words"] == "Training seconds"
    assert (entry["a"], entry["b"], entry["reason"]) == ("0.5", "0.6", DURATION_COARSE)

    # the control: seconds from os.urandom in both runs, with testable digits, in the same line
    controls = [
        make_run(tmp_path, f"c{i}", facts(0.54 + i / 10, steps=200), card(s))
        for i, s in enumerate(("41.203", "12.345"))
    ]
    result = compare.compare_runs(controls)
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert [d["name"] for d in result.value_differences] == ["line 6"]

    # and a differing accuracy beside an excused duration keeps the card a difference
    other = make_run(tmp_path, "r3", facts(0.61, steps=200), card("0.6", accuracy="0.9694"))
    result = compare.compare_runs([runs[0], other])
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert [d["name"] for d in result.value_differences] == ["line 3"]
