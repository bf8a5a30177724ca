"""The short run's output, read for the sentence of a failed init, is the job's: progress bars that redraw
their line with `\\r` or `\\b` and never end it, bytes that are no text, no final newline, and the
traceback of init's own Ctrl-C glued to a bar's line. Reading it never fails, and that traceback is
never shown as the job's. The names of the files it writes are its own too: any bytes but `/`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobox import cli
from reprobox.jobfile import load_job
from reprobox.scaffold import InitFailed, InitOptions, _check_usable
from reprobox.scaffold._joblog import TRACEBACK, drawn, last_lines, screen_lines

OUR_INTERRUPT = (
    f"{TRACEBACK}\n"
    '  File "/work/train.py", line 40, in <module>\n'
    "    model.fit(x, y, epochs=3)\n"
    "KeyboardInterrupt\n"
)
ERASE = "\b" * 60 + "\r"  # how Keras' progress bar takes back its line before drawing it again
KERAS_BAR = "".join(
    f"{ERASE}{step}/10 [{'=' * step}>{'.' * (10 - step)}] - ETA: {10 - step}s - loss: 0.{9 - step}"
    for step in range(1, 6)
)


def observation(log: str, *, outputs: list[tuple[str, int]]) -> Any:
    """What `_check_usable` reads of a short run that init stopped when its budget was spent."""
    return SimpleNamespace(
        record=SimpleNamespace(succeeded=False, failure="interrupted", status="interrupted"),
        stopped_by_us=True,
        outputs=outputs,
        seen=SimpleNamespace(stop={"reason": "budget", "seconds": 60.0, "cpu_seconds": 60.0}),
        log_tail=log,
    )


def test_a_keras_bar_glued_to_inits_own_traceback_is_shown_without_it(tmp_path: Path) -> None:
    log = "Epoch 1/3\n" + KERAS_BAR + OUR_INTERRUPT
    options = InitOptions(command=("python", "train.py"), folder=tmp_path, job_file=tmp_path / "job.yaml")
    with pytest.raises(InitFailed) as refused:  # it wrote nothing; before, max() of nothing raised
        _check_usable(observation(log, outputs=[]), options)
    message = refused.value.message
    assert "Epoch 1/3\n  5/10 [=====>.....] - ETA: 5s - loss: 0.4" in message
    assert "Traceback" not in message and "KeyboardInterrupt" not in message
    _check_usable(observation(log, outputs=[("model.keras", 10)]), options)  # a checkpoint: usable


def test_a_line_is_drawn_as_a_terminal_shows_it() -> None:
    assert drawn("10%|#   |\r50%|#####|") == "50%|#####|"
    assert drawn("loss: 0.50\b\b\b\b0.25") == "loss: 0.25"
    assert drawn("\x1b[32mok\x1b[0m \x00\x07done\t!") == "ok done !"
    assert screen_lines("a\r\n\r\nb") == ["a", "b"]
    assert screen_lines(f"bar 3/10{TRACEBACK}\nKeyboardInterrupt") == [
        "bar 3/10",
        TRACEBACK,
        "KeyboardInterrupt",
    ]


def test_a_chain_of_tracebacks_of_the_interrupt_is_cut_whole() -> None:
    chained = (
        "step 4\n"
        + OUR_INTERRUPT
        + "\nDuring handling of the above exception, another exception occurred:\n\n"
        + OUR_INTERRUPT
    )
    assert last_lines(chained, 12, interrupted=True) == ["step 4"]
    assert last_lines(chained, 12, interrupted=False)[-1] == "KeyboardInterrupt"  # a failure: shown whole


def decoded(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")  # as the tail of stdout.log is read


OUTPUT_BYTES = st.lists(
    st.one_of(
        st.binary(max_size=40),
        st.sampled_from([b"\r", b"\b", b"\x00", b"\n", b"\r\n", b"\x1b[2K", b"\x1b]", TRACEBACK.encode()]),
    ),
    max_size=40,
).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(OUTPUT_BYTES, st.booleans(), st.integers(min_value=0, max_value=20))
def test_any_output_is_read_without_failing(raw: bytes, interrupted: bool, count: int) -> None:
    lines = last_lines(decoded(raw), count, interrupted=interrupted)
    assert len(lines) <= count
    for line in lines:
        assert line.strip() and line.isprintable()


@settings(max_examples=300, deadline=None)
@given(OUTPUT_BYTES)
def test_inits_traceback_glued_to_any_output_is_cut_off(raw: bytes) -> None:
    before = decoded(raw)
    while TRACEBACK in before:  # the job's own tracebacks are another case
        before = before.replace(TRACEBACK, "")
    shown = last_lines(before + OUR_INTERRUPT, 12, interrupted=True)
    assert shown == last_lines(before, 12, interrupted=False)


def test_files_named_with_any_bytes_are_named_in_the_job_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.py").write_text(
        "import time\nopen(b'model\\xff.pt', 'wb').write(b'w' * 99)\n"
        "open('two\\nlines.log', 'w').write('x')\ntime.sleep(60)\n"
    )
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = cli.main(["init", "--json", "-q", "--seconds", "10", "--", sys.executable, "train.py"])
    data = json.loads(capsys.readouterr().out or "{}")
    assert code == 0, data  # before, writing the job file failed on a name that is no UTF-8 (exit 70)
    text = (tmp_path / "job.yaml").read_text(encoding="utf-8")
    assert '"model\\udcff.pt"' in text and '"two\\nlines.log"' in text
    assert load_job(tmp_path / "job.yaml").name == tmp_path.name
