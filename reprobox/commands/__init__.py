"""The subcommands: each module adds its parsers and handlers; handlers print only through output.Output.

A command's module is imported only when that command runs (or when every command is listed, for
`reprobox --help`): with every command's module, `reprobox run` loaded 174 of reprobox's modules where
it needs 114.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterable

COMMANDS: dict[str, str] = {
    "init": "init",
    "run": "run",
    "verify": "jobs",
    "compare": "jobs",
    "explain": "explain",
    "diff": "diff",
    "spot-check": "spotcheck",
    "cost": "cost",
    "build": "images",
    "images": "images",
    "offline-base": "offline_base",
    "lock": "lock",
    "audit": "audit",
    "report": "inspect",
    "fingerprint": "inspect",
    "hash": "inspect",
    "attest": "publish",
    "reproduce": "publish",
    "pack": "publish",
    "keygen": "publish",
    "clean": "clean",
    "slurm-node": "slurm_node",
}
"""Each subcommand and the module (under reprobox.commands) that registers it, in `--help`'s order."""


def modules_for(command: str | None) -> list[str]:
    """The modules to register: the one behind ``command``, or every one (in order) when it is None or
    names no command, so that argparse can list them all or say which exist."""
    if command in COMMANDS:
        return [COMMANDS[command]]
    return list(dict.fromkeys(COMMANDS.values()))


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], modules: Iterable[str]) -> None:
    for name in modules:
        importlib.import_module(f"{__name__}.{name}").register(commands)
