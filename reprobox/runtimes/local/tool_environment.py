"""Keeping reprobox's own environment out of the job's: the job runs the `python` the user's PATH finds.

Installed as a tool (``pipx install reprobox``, ``uv tool install reprobox``), reprobox lives in a
virtual environment of its own that holds reprobox and its dependencies, never the job's packages. The
guest runs in that environment's interpreter (it needs the standard library and NumPy alone); the job's
command must not: a PATH that lists the tool environment's scripts folder before the user's own would
make the job's ``python`` reprobox's, without torch or whatever else the job imports. A tool
environment is recognised by the receipt its installer leaves at its root.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TOOL_RECEIPTS = ("pipx_metadata.json", "uv-receipt.toml")
"""Files pipx and uv leave at the root of an environment they made for one tool."""


def tool_scripts_folders(prefix: Path | None = None, executable: Path | None = None) -> frozenset[Path]:
    """reprobox's own scripts folders when it runs from a tool environment (none otherwise: an
    environment the user made, with reprobox beside the job's packages, is the user's to put on PATH)."""
    root = Path(sys.prefix if prefix is None else prefix)
    if not any((root / receipt).is_file() for receipt in TOOL_RECEIPTS):
        return frozenset()
    interpreter = Path(sys.executable if executable is None else executable)
    return frozenset({_resolved(root / "bin"), _resolved(interpreter.parent)})


def job_search_path(path: str, tool_folders: frozenset[Path] | None = None) -> str:
    """The user's PATH as the job should see it: unchanged, less reprobox's tool environment's scripts."""
    drop = tool_scripts_folders() if tool_folders is None else tool_folders
    if not drop:
        return path
    kept = [entry for entry in path.split(os.pathsep) if not entry or _resolved(Path(entry)) not in drop]
    return os.pathsep.join(kept)


def _resolved(folder: Path) -> Path:
    try:
        return folder.resolve()
    except OSError:
        return folder.absolute()
