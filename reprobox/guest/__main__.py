"""`python -m reprobox.guest [--namespace SPEC.json] -- COMMAND...`: the entrypoint of every run, in a
container or locally; with `--namespace`, the run's private mount namespace is entered first."""

from __future__ import annotations

import gc
import os
import sys

EXIT_DISK_FULL = 1  # the controller tells the full disk from the records it then cannot write either


def _import_nothing_from_the_start_folder() -> None:
    """`python -m` puts the folder it starts in first on sys.path: the job's code, or a run folder the
    job writes into. The guest imports modules after the job ends (hashing's readers among them), and a
    job's `profile.py` or `csv.py` must never stand in for one of the standard library's there."""
    if sys.path and sys.path[0] in ("", os.getcwd()):  # noqa: PTH109 - before pathlib is imported
        del sys.path[0]


def run(argv: list[str]) -> int:
    """The entrypoint, with a full disk met where no record could hold it said in one line, not a
    traceback (the controller records the run as failed for it)."""
    if argv[:1] == ["--namespace"] and len(argv) > 1:
        from reprobox.guest import namespace  # while this process is still single-threaded

        refused = namespace.enter(argv[1])
        if refused is not None:
            sys.stderr.write(refused + "\n")
            return namespace.EXIT_SETUP_FAILED
        argv = argv[2:]
    from pathlib import Path

    from reprobox.diskspace import DiskFullFact, is_full
    from reprobox.guest import settings
    from reprobox.guest.entrypoint import main

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
    _import_nothing_from_the_start_folder()
    code = run(sys.argv[1:])
    gc.freeze()  # the process ends: no last walk of the collector over every module's objects (see cli)
    sys.exit(code)
