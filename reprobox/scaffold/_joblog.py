"""The last lines of the short run's output as a terminal showed them, for the sentence of a failed init.

The output is the job's, so it may be anything: progress bars that redraw one line with carriage returns
(tqdm) or backspaces (Keras) and never end it, colours, bytes that are no text, no final newline. Each
line is drawn as a terminal would draw it, and the traceback of init's own Ctrl-C is cut off, also where
it is glued to the end of a progress bar's line.
"""

from __future__ import annotations

import re

TRACEBACK = "Traceback (most recent call last):"
# The sentences Python puts between the tracebacks of one chain of exceptions.
CHAINED = frozenset(
    {
        "During handling of the above exception, another exception occurred:",
        "The above exception was the direct cause of the following exception:",
    }
)
# Terminal escape sequences: CSI (colours, cursor moves), OSC (titles, links), and the short ones.
ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_]?)")


def screen_lines(text: str) -> list[str]:
    """Each non-blank line of `text` as a terminal shows it; a traceback glued to the end of a line
    starts a line of its own."""
    lines: list[str] = []
    for raw in text.split("\n"):
        first, *glued = raw.split(TRACEBACK)
        for part in [first, *(TRACEBACK + rest for rest in glued)]:
            line = drawn(part)
            if line.strip():
                lines.append(line)
    return lines


def drawn(raw: str) -> str:
    """One line as a terminal draws it: a carriage return goes back to its start, a backspace one
    column back, what follows writes over what was there; other control characters draw nothing."""
    cells: list[str] = []
    column = 0
    for char in ESCAPE.sub("", raw):
        if char == "\r":
            column = 0
            continue
        if char == "\b":
            column = max(column - 1, 0)
            continue
        if char == "\t":
            char = " "  # noqa: PLW2901 - a tab shown as one space
        elif not char.isprintable():
            continue
        if column < len(cells):
            cells[column] = char
        else:
            cells.append(char)
        column += 1
    return "".join(cells).rstrip()


def last_lines(text: str, count: int, *, interrupted: bool) -> list[str]:
    """The last `count` lines of the output; of a run init interrupted, those before the traceback of
    its Ctrl-C (which says nothing of the job)."""
    lines = screen_lines(text)
    if interrupted and lines and "KeyboardInterrupt" in lines[-1]:
        start = _last_traceback(lines)
        if start is not None:
            lines = lines[:start]
    return lines[-count:] if count > 0 else []


def _last_traceback(lines: list[str]) -> int | None:
    """Where the last traceback starts, with those chained before it ("During handling of the above
    exception..."); None when no line starts one."""
    starts = [i for i, line in enumerate(lines) if line.startswith(TRACEBACK)]
    if not starts:
        return None
    start = starts[-1]
    while start > 0 and lines[start - 1].strip() in CHAINED:
        earlier = [i for i in starts if i < start - 1]
        if not earlier:
            break
        start = earlier[-1]
    return start
