"""`clean`: remove what a controller that was killed outright left behind."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox import cleanup
from reprobox.commands.common import add_command, add_output_flags
from reprobox.errors import EXIT_OK, EnvironmentProblem
from reprobox.runner import runs_dir_default

if TYPE_CHECKING:
    from reprobox.commands.output import Output
    from reprobox.engine import Engine

CLEAN_EPILOG = """\
examples:
  reprobox clean --dry-run            list what would be removed, remove nothing
  reprobox clean                      remove it, listing each item
  reprobox clean --runs-dir /data/runs --json

Only leftovers whose controller is gone are touched: containers labelled io.reprobox.managed, local
job processes, and run dirs with no manifest. Runs of a live reprobox, and anything a controller on
another host made, are left alone (run clean on that host).
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    clean = add_command(
        commands,
        "clean",
        "remove containers, processes and run dirs left by a reprobox that was killed",
        CLEAN_EPILOG,
    )
    clean.add_argument("--runs-dir", type=Path, default=runs_dir_default(), help="where to look for runs")
    clean.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    add_output_flags(clean)
    clean.set_defaults(handler=clean_command)


def _engine() -> Engine | None:
    from reprobox import engine

    try:
        return engine.connect(timeout=5)
    except engine.EngineUnavailable:
        return None  # no engine, no containers to clean


def clean_command(args: argparse.Namespace, out: Output) -> int:
    engine = _engine()
    leftovers = cleanup.find_leftovers(args.runs_dir, engine)
    items: list[dict[str, Any]] = []
    lines = []
    for leftover in leftovers:
        item = leftover.to_json()
        error = None
        if not args.dry_run:
            try:
                cleanup.remove(leftover, engine)
            except (OSError, EnvironmentProblem) as exc:
                error = str(exc)
        item["removed"] = not args.dry_run and error is None
        if error:
            item["error"] = error
        items.append(item)
        verb = "would remove" if args.dry_run else "could not remove" if error else "removed"
        pids = f" (pids {', '.join(map(str, leftover.pids))})" if leftover.pids else ""
        lines.append(
            f"{verb} {leftover.kind} {leftover.target}{pids}: {leftover.reason}"
            + (f": {error}" if error else "")
        )
    if not lines:
        lines.append("nothing to clean")
    if engine is None:
        lines.append("no container engine answered: containers were not checked")
    out.result(
        {"dry_run": bool(args.dry_run), "leftovers": items, "containers_checked": engine is not None},
        "\n".join(lines),
    )
    return EXIT_OK
