"""`python -m reprobox.runtimes.slurm node PLAN`: the node side, as the batch script starts it.

An entry point of its own, like the main CLI: it parses its arguments here and hands the library a path.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from reprobox.runtimes.slurm._model import PLAN_FILE
from reprobox.runtimes.slurm._node import run_on_node


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reprobox.runtimes.slurm",
        description="The node side of reprobox's slurm runtime (started by the batch script it writes).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    node = commands.add_parser("node", help="run one planned run on this node")
    node.add_argument("plan", type=Path, help=f"the run's {PLAN_FILE}")
    args = parser.parse_args(argv)
    return run_on_node(args.plan)


if __name__ == "__main__":
    raise SystemExit(main())
