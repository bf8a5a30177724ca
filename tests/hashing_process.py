"""`reprobox hash FILE` in a child process, and the moment it is hashing: for tests that cut a file short
or send a signal while it is read."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def start_hash(path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "reprobox", "hash", str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
    )


def wait_until_hashing(process: subprocess.Popen[str]) -> None:
    """Until the process has its reading threads going (the CLI imported, the file opened)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        tasks = Path(f"/proc/{process.pid}/task")
        if tasks.exists() and len(list(tasks.iterdir())) >= 3:
            time.sleep(0.3)
            return
        time.sleep(0.05)
    pytest.fail("reprobox hash never started hashing")


def cut_short_while_hashed(path: Path) -> str:
    """Cut ``path`` to 4 KiB while `reprobox hash` reads it; its stderr, after checking it said so in one
    sentence and exited 4 (the job changed the file), never dying of SIGBUS."""
    process = start_hash(path)
    wait_until_hashing(process)
    os.truncate(path, 4096)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 4, stderr
    assert "changed while it was hashed" in stderr and str(path) in stderr
    assert "Traceback" not in stderr
    return stderr
