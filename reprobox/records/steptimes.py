"""The step-times record (`.reprobox/step-times.jsonl`): one `{"step": n, "seconds": s}` per line.

Written by the guest's step clock, read by `reprobox cost`. The job could write anything there, so
the reader is bounded and keeps only well-formed lines.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from reprobox import saferead
from reprobox.records.layout import GUEST_STATE

STEP_TIMES_FILE = "step-times.jsonl"
MAX_BYTES = 16 << 20
MAX_LINE = 256


def encode_step_time(step: int, seconds: float) -> str:
    return json.dumps({"step": step, "seconds": round(seconds, 9)}) + "\n"


def read_step_times(run_dir: Path) -> dict[int, float]:
    """Seconds per optimizer step of a run ({} when it kept none); malformed lines are skipped."""
    path = run_dir / GUEST_STATE / STEP_TIMES_FILE
    times: dict[int, float] = {}
    try:
        lines = list(saferead.iter_lines(path, limit=MAX_BYTES, line_limit=MAX_LINE, root=run_dir))
    except (OSError, saferead.UnsafeFile):
        return times
    for line in lines:
        try:
            item = json.loads(line) if line else None
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        step, seconds = item.get("step"), item.get("seconds")
        if (
            isinstance(step, int)
            and not isinstance(step, bool)
            and step > 0
            and isinstance(seconds, int | float)
            and math.isfinite(seconds)
            and seconds >= 0
        ):
            times[step] = float(seconds)
    return times
