"""The guest imports what hashing needs while the job runs, unless a cgroup limits its memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reprobox.guest.warmup import memory_limited


def cgroup_tree(root: Path, files: dict[str, str], own: str) -> tuple[Path, Path]:
    for relative, value in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(value + "\n")
    (root / "self").write_text(own)
    return root, root / "self"


@pytest.mark.parametrize(
    ("files", "own", "limited"),
    [
        ({"memory.max": "max", "job/memory.max": "max"}, "0::/job\n", False),  # a container without one
        ({"slurm/memory.max": "8589934592", "slurm/step/memory.max": "max"}, "0::/slurm/step\n", True),
        ({"memory/memory.limit_in_bytes": "9223372036854771712"}, "4:memory:/\n0::/\n", False),
        ({"memory/a/memory.limit_in_bytes": "4294967296"}, "4:memory:/a\n1:cpu:/\n", True),
        ({}, "", False),  # nothing to read: no limit known
    ],
)
def test_a_memory_limit_is_found_at_any_level(tmp_path: Path, files, own: str, limited: bool) -> None:
    cgroups, self_file = cgroup_tree(tmp_path, files, own)
    assert memory_limited(cgroups, self_file) is limited


def test_the_warm_up_imports_torch_and_the_hashing() -> None:
    script = (
        "import sys\n"
        "from reprobox.guest import warmup\n"
        "warmup.memory_limited = lambda: False\n"
        "w = warmup.WarmUp(); w.start(); w._thread.join()\n"
        "print('torch' in sys.modules, 'reprobox.guest.hashing' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]


def test_a_job_that_ends_at_once_waits_for_no_import() -> None:
    script = (
        "import sys\n"
        "from reprobox.guest import warmup\n"
        "warmup.memory_limited = lambda: False\n"
        "w = warmup.WarmUp(); w.start(); w.finish()\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False"]
