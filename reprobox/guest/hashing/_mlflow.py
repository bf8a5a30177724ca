"""MLflow's file store (``mlruns/<experiment>/<run>/metrics|params|tags/<name>``) read as named values.

MLflow writes one file per metric, with a line ``<timestamp ms> <value> <step>`` for each logged value
(older versions leave the step out: 0), and one file per param or tag holding its text. Files without a
suffix are otherwise compared as text lines, where each line's clock makes every run "differ"; read
here, each value is ``<name>.step_<n>`` and its clock ``<name>.step_<n>.timestamp`` (see ``_logvalues``),
a param or tag is ``<name>`` with its text. They are recognised by their place: below an ``mlruns``
folder, an experiment, a run, then ``metrics``, ``params`` or ``tags`` (names with ``/`` are folders
there). ``meta.yaml`` files are YAML and read as such (``_text``).
"""

from __future__ import annotations

import time
from pathlib import Path

from reprobox.guest.hashing._bounds import OverLimit
from reprobox.guest.hashing._logvalues import LogValues, read_capped

READER_NAME = "MLflow file store reader"
STORE_FOLDER = "mlruns"
KINDS = ("metrics", "params", "tags")

MAX_MLFLOW_FILE_BYTES = 64 << 20

READ_SECONDS = 3.0
"""Reading one metric file's lines stops past this much CPU time (the reading thread's, so a busy machine does
not change what is read): each line is two values, each digested in turn."""
"""As ``_text.MAX_TEXT_BYTES``: larger files are logs rather than state, compared as bytes."""


def mlflow_entry(path: Path) -> tuple[str, str] | None:
    """(``metrics``/``params``/``tags``, the entry's name) when the file lies where MLflow keeps one."""
    parts = path.parts
    for index, part in enumerate(parts):
        if part == STORE_FOLDER and len(parts) > index + 4 and parts[index + 3] in KINDS:
            return parts[index + 3], "/".join(parts[index + 4 :])
    return None


def read_mlflow(path: Path) -> list[tuple[str, object]]:
    """The entry's values as (name, value) pairs; ValueError says why it cannot be read."""
    entry = mlflow_entry(path)
    if entry is None:
        raise ValueError("not a metric, param or tag of an MLflow file store")
    kind, name = entry
    text = read_capped(path, MAX_MLFLOW_FILE_BYTES, "of an MLflow file").decode("utf-8")
    found = LogValues()
    if kind != "metrics":
        found.add(name, text)
        return found.pairs
    deadline = time.thread_time() + READ_SECONDS
    for number, line in enumerate(text.splitlines(), start=1):
        if number % 4096 == 0 and time.thread_time() > deadline:
            raise OverLimit(
                f"reading its lines takes over {READ_SECONDS} s of CPU time, the limit ({number} read)"
            )
        if not line.strip():
            continue
        timestamp, value, step = _metric_line(line, number)
        base = found.unique(f"{name}.step_{step}")
        found.add(base, value)
        found.add(f"{base}.timestamp", timestamp)
    return found.pairs


def _metric_line(line: str, number: int) -> tuple[int, float, int]:
    fields = line.split()
    if len(fields) not in (2, 3):
        raise ValueError(f"line {number} is not '<timestamp> <value> <step>'")
    try:
        timestamp = int(fields[0])
        value = float(fields[1])
        step = int(fields[2]) if len(fields) == 3 else 0
    except ValueError:
        raise ValueError(f"line {number} is not '<timestamp> <value> <step>'") from None
    return timestamp, value, step
