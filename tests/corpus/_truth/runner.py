"""Runs a corpus case's command twice, each in a fresh temporary copy of its folder, the same way.

This is the truth's side, independent of reprobox: plain subprocesses, the case's own command, with
PYTHONHASHSEED and the generators' seeds (sitecustomize.py here) set from outside, identically in both
runs. Each case's truth.py compares the two copies afterwards with its library's own loader.
TRUTH_SELF_CHECK=1 seeds the second run differently, so that a comparer can be seen to fail.
"""

from __future__ import annotations

import atexit
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
IGNORED = shutil.ignore_patterns("truth.py", "case.yaml", "__pycache__", "job.yaml", "runs")


def case_command(case_dir: Path) -> list[str]:
    """The command case.yaml names (`command:` line), else `python train.py`."""
    for line in (case_dir / "case.yaml").read_text().splitlines():
        if line.startswith("command:"):
            return shlex.split(line.split(":", 1)[1].strip().strip("'\""))
    return ["python", "train.py"]


def run_twice(
    case_dir: Path, *, seed_torch: bool = False, seed_unseeded: bool = False, timeout: float = 300
) -> tuple[Path, Path]:
    """Two finished copies of the case's folder, in a temporary directory removed when the truth exits
    (TRUTH_KEEP=1 keeps it, to look at what the runs wrote). seed_unseeded: NumPy's default_rng()
    without a seed is seeded from outside too (sitecustomize.py), as reprobox seeds such generators."""
    root = Path(tempfile.mkdtemp(prefix=f"truth-{case_dir.name}-"))
    if os.environ.get("TRUTH_KEEP") != "1":
        atexit.register(shutil.rmtree, root, ignore_errors=True)
    env = dict(os.environ)
    env.update(
        PYTHONHASHSEED="0",
        PYTHONPATH=str(HERE),
        TRUTH_SEED="0",
        TRUTH_SEED_TORCH="1" if seed_torch else "0",
        TRUTH_SEED_UNSEEDED="1" if seed_unseeded else "0",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    copies = []
    for name in ("a", "b"):
        if os.environ.get("TRUTH_SELF_CHECK") == "1" and name == "b":
            env["TRUTH_SEED"] = "1"  # the comparer's own check: different seeds must show a difference
        copy = root / name
        shutil.copytree(case_dir, copy, ignore=IGNORED)
        done = subprocess.run(
            case_command(case_dir),
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            report("failed", f"run {name} exited {done.returncode}: {done.stderr.strip()[-400:]}")
            sys.exit(3)
        copies.append(copy)
    return copies[0], copies[1]


def report(truth: str, why: str) -> None:
    """The one JSON line every truth.py prints."""
    print(json.dumps({"truth": truth, "why": why}))


def verdict(differences: list[str], same: str) -> None:
    """Reproduced when no value differs, else not reproducible naming the differences."""
    if differences:
        report("not reproducible", "; ".join(differences[:5]))
    else:
        report("reproduced", same)


def written(copy: Path, original: Path) -> list[str]:
    """Files the run wrote or changed (relative paths, sorted): the output tree."""
    out = []
    for path in sorted(copy.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(copy)
            source = original / rel
            if not source.exists() or source.read_bytes() != path.read_bytes():
                out.append(str(rel))
    return out
