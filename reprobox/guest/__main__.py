"""`python -m reprobox.guest -- COMMAND...`: the entrypoint of every run, in a container or locally."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from reprobox.diskspace import DiskFullFact, is_full
from reprobox.guest import settings
from reprobox.guest.entrypoint import main

EXIT_DISK_FULL = 1  # the controller tells the full disk from the records it then cannot write either


def run(argv: list[str]) -> int:
    """The entrypoint, with a full disk met where no record could hold it said in one line, not a
    traceback (the controller records the run as failed for it)."""
    try:
        return main(argv)
    except OSError as exc:
        if not is_full(exc):
            raise
        named = Path(os.fsdecode(exc.filename)).parent if exc.filename else None
        folder = named or os.environ.get(settings.RUN_DIR)
        fact = DiskFullFact.met(exc, Path(folder)) if folder else DiskFullFact("", None)
        sys.stderr.write(f"reprobox: {fact.sentence()}\n")
        return EXIT_DISK_FULL


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
