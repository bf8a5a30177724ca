"""What an observed run's processes recorded (`.reprobox/observed-<pid>.jsonl`) and why it was stopped
(`.reprobox/observe-stop.json`), read back for `reprobox init`.

The job's own processes write these files, so they are read as untrusted: bounded, regular files only,
malformed lines skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobox import saferead
from reprobox.records.layout import GUEST_STATE

OBSERVED_GLOB = "observed-*.jsonl"
STOP_FILE = "observe-stop.json"
MAX_FILES = 512
MAX_BYTES = 16 << 20
MAX_LINE = 8192


@dataclass
class Observed:
    """Everything the observed run's processes saw, merged."""

    read: set[str] = field(default_factory=set)  # absolute paths opened for reading
    env: set[str] = field(default_factory=set)  # variable names looked up
    distributions: dict[str, str] = field(default_factory=dict)  # distribution -> version
    why: dict[str, str] = field(default_factory=dict)  # distribution -> why ("imported by eval.py:12")
    # distribution -> (its module, the local folder it was installed from: `pip install .` or `-e .`)
    installed_from: dict[str, tuple[str, str]] = field(default_factory=dict)
    modules: set[str] = field(default_factory=set)  # top-level modules the job's own code imported
    external: dict[str, str] = field(default_factory=dict)  # module -> its file, outside site-packages
    stop: dict[str, Any] = field(default_factory=dict)  # reason (checkpoint, budget), file, seconds


def read_observed(run_dir: Path) -> Observed:
    found = Observed()
    state = run_dir / GUEST_STATE
    for path in sorted(state.glob(OBSERVED_GLOB))[:MAX_FILES]:
        try:
            lines = list(saferead.iter_lines(path, limit=MAX_BYTES, line_limit=MAX_LINE, root=run_dir))
        except (OSError, saferead.UnsafeFile):
            continue
        for line in lines:
            _add(found, line)
    try:
        stop = saferead.read_json(state / STOP_FILE, 4096, root=run_dir)
    except (OSError, saferead.UnsafeFile, ValueError):
        stop = None
    if isinstance(stop, dict):
        found.stop = {k: v for k, v in stop.items() if isinstance(v, str | int | float)}
    return found


def _add(found: Observed, line: bytes | None) -> None:
    try:
        item = json.loads(line) if line else None
    except ValueError:
        return
    if not isinstance(item, dict):
        return
    if isinstance(item.get("read"), str):
        found.read.add(item["read"])
    elif isinstance(item.get("env"), str):
        found.env.add(item["env"])
    elif isinstance(item.get("import"), str):
        found.modules.add(item["import"])
    elif isinstance(item.get("external"), str) and isinstance(item.get("file"), str):
        found.external[item["external"]] = item["file"]
    elif all(isinstance(item.get(key), str) for key in ("module", "distribution", "version")):
        found.distributions[item["distribution"]] = item["version"]
        if isinstance(item.get("why"), str):
            found.why.setdefault(item["distribution"], item["why"])
        if isinstance(item.get("source"), str):
            found.installed_from[item["distribution"]] = (item["module"], item["source"])
