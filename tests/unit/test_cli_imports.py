"""The CLI starts where the docker SDK is missing: the job image runs `reprobox run --runtime local`."""

from __future__ import annotations

import subprocess
import sys

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
