"""pip, run as a subprocess: its resolver and downloader are the ones the image build uses, so a lock
made here is one the build's `pip install --require-hashes` accepts.

Its output streams to the progress reporter (a spinner on a terminal) and is kept for the failure
sentence; `--log` keeps its debug lines too, which alone say that an index could not be reached.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reprobox import progress
from reprobox.errors import EnvironmentProblem


@dataclass(frozen=True)
class PipRun:
    """How one pip command ended: its exit status, what it printed, and its debug log."""

    returncode: int
    output: str
    log: str


def run_pip(arguments: Sequence[str], scratch: Path) -> PipRun:
    """Run `pip ARGUMENTS` with the interpreter reprobox runs on; pip's own configuration applies."""
    log = scratch / f"pip-{len(list(scratch.glob('pip-*.log')))}.log"
    command = [*_pip_command(), *arguments, "--no-input", "--disable-pip-version-check", "--log", str(log)]
    lines: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            progress.build_output(line)
        returncode = process.wait()
    debug = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return PipRun(returncode, "".join(lines), debug)


def _pip_command() -> list[str]:
    if importlib.util.find_spec("pip") is None:
        raise EnvironmentProblem(
            f"reprobox lock runs pip, which is not installed beside reprobox ({sys.executable}); install "
            "it there (`uv tool install reprobox --with pip`, or `python -m ensurepip`)"
        )
    return [sys.executable, "-m", "pip"]
