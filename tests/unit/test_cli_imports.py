"""The CLI starts where the docker SDK is missing (the job image runs `reprobox run --runtime local`),
and a command imports its own module, not every command's."""

from __future__ import annotations

import argparse
import subprocess
import sys

from reprobox import cli, commands

SCRIPT = """
import sys
sys.modules["docker"] = None  # any `import docker` now raises ImportError
from reprobox import cli
parser = cli.build_parser()
assert "docker" not in sys.modules or sys.modules["docker"] is None
print("ok")
"""


def test_every_command_registers_without_the_docker_sdk() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def subcommands(parser: argparse.ArgumentParser) -> list[str]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


def test_the_command_table_names_every_subcommand_its_module_registers() -> None:
    assert subcommands(cli.build_parser([])) == list(commands.COMMANDS)  # --help lists them in this order
    for name, module in commands.COMMANDS.items():
        alone = [other for other, owner in commands.COMMANDS.items() if owner == module]
        assert subcommands(cli.build_parser([name, "--help"])) == alone, name


RUN_IMPORTS = """
import sys
from reprobox import cli
cli.build_parser(["run", "job.yaml"])
print(" ".join(sorted(m for m in sys.modules if m.startswith("reprobox."))))
"""


def test_reprobox_run_imports_no_other_commands_module() -> None:
    done = subprocess.run([sys.executable, "-c", RUN_IMPORTS], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert "reprobox.commands.run" in loaded
    others = {f"reprobox.commands.{module}" for module in commands.COMMANDS.values()} - {
        "reprobox.commands.run"
    }
    assert not loaded & others, loaded & others
    # nor what compares runs: the comparison, its evidence and NumPy cost every run's start
    assert not {"reprobox.reproduce", "reprobox.bundle", "reprobox.cost", "reprobox.compare"} & loaded
    assert not {"reprobox.runspecific", "reprobox.verify"} & loaded
