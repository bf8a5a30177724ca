"""`reprobox slurm-node PLAN`: the node side of the slurm runtime, as its batch script starts it.

Not for people: the batch script reprobox writes runs it on the allocated node, so it has no summary in
`reprobox --help`. It goes through the CLI like every command, so its arguments become a path here and
its errors read like every other command's.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox.commands.common import Commands

if TYPE_CHECKING:
    from reprobox.commands.output import Output

NAME = "slurm-node"


def register(commands: Commands[argparse.ArgumentParser]) -> None:
    node = commands.add_parser(  # no help=: argparse then leaves it out of the command list
        NAME,
        description="Run one planned run on this Slurm node (started by the batch script reprobox writes).",
    )
    node.add_argument("plan", type=Path, help="the run's node plan (JSON), written by the controller")
    node.set_defaults(handler=slurm_node_command)


def slurm_node_command(args: argparse.Namespace, _out: Output) -> int:
    from reprobox.runtimes.slurm._node import run_on_node

    return run_on_node(args.plan)
