#!/usr/bin/env python3
"""Write a job's hash-locked extra requirements (`image: {requirements: ...}`): `reprobox lock`, under
its old name. This checkout's reprobox runs it, installed or not.

Usage: python scripts/lock_requirements.py REQUIREMENTS -o LOCK [--base cpu|cuda|LOCK] [--python-version X.Y]
and every other flag of `reprobox lock --help` (e.g. --wheelhouse DIR to fetch the wheels too).
As before, the image's lock defaults to the CPU one (env/requirements-cpu.lock); `reprobox lock` itself
takes the one an image build would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    arguments = sys.argv[1:]
    if not any(arg == "--base" or arg.startswith("--base=") for arg in arguments):
        arguments += ["--base", "cpu"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.call([sys.executable, "-m", "reprobox", "lock", *arguments], env=env)


if __name__ == "__main__":
    sys.exit(main())
