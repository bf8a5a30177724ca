"""Every reader under a fuzzer, for a bounded time: hostile files are read or refused, nothing else.

Each target (one reader family) mutates seeds that the real libraries wrote (``tests/fuzz``) for
``REPROBOX_FUZZ_SECONDS`` (2 s by default, a smoke test within the suite's time budget), each input hashed as
``reprobox hash`` does in a forked child held to 10 s of CPU time and 512 MiB. Outcome classes are
checked, never messages: read, compared as bytes with a note, or refused (UsageError, exit 2). Inputs
the fuzzer once found (``tests/fuzz/regressions``) and hand-aimed ones (``tests/fuzz/probes``) are
replayed every run. ``scripts/fuzz.sh READER SECONDS`` fuzzes longer and keeps what it finds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fuzz.forkserver import (
    FOLDERS,
    TARGET_FILES,
    Outcome,
    folder_input,
    fuzz,
    input_path,
    input_root,
    preload_torch,
    run_input,
)
from tests.fuzz.probes import PROBES

ROOT = Path(__file__).parents[2]
REGRESSIONS = ROOT / "tests" / "fuzz" / "regressions"
FUZZ_SECONDS = float(os.environ.get("REPROBOX_FUZZ_SECONDS", "2"))
FUZZ_SEED = int(os.environ.get("REPROBOX_FUZZ_SEED", str(int(time.time()) // 86400)))  # one a day


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("seeds")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "tests.fuzz.seeds", str(folder)], check=True, cwd=ROOT, env=env)
    return folder


def _described(outcome: Outcome) -> str:
    lines = outcome.detail.strip().splitlines()
    return f"{outcome.kind} after {outcome.seconds:.1f} s, {outcome.grown_bytes >> 20} MiB: " + (
        lines[-1] if lines else ""
    )


@pytest.mark.parametrize("target", list(TARGET_FILES))
def test_fuzzed_inputs_are_read_or_refused(target: str, seeds: Path, tmp_path: Path) -> None:
    campaign = fuzz(target, FUZZ_SECONDS, seeds, tmp_path / "work", tmp_path / "findings", FUZZ_SEED)
    assert campaign.executions >= len(list((seeds / target).iterdir()))
    assert "read" in campaign.kinds, campaign.kinds  # the seeds themselves read
    assert len(campaign.kinds) > 1, campaign.kinds  # and mutations reach past them: notes or refusals
    found = [f"{path}: {_described(outcome)}" for path, outcome in campaign.findings]
    assert not found, (
        f"seed {FUZZ_SEED} ({campaign.executions} inputs): copy each into tests/fuzz/regressions/{target}/ "
        "and fix its class at the reader's boundary:\n" + "\n".join(found)
    )


KEPT = sorted(p for p in REGRESSIONS.glob("*/*") if p.is_file() or p.parent.name in FOLDERS)


@pytest.mark.parametrize("kept", KEPT, ids=[f"{p.parent.name}/{p.name}" for p in KEPT])
def test_each_input_the_fuzzer_found_is_read_or_refused(
    kept: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kept.parent.name == "torch":
        preload_torch()
    target = kept.parent.name
    if target in FOLDERS:  # kept whole; or the input alone (atheris), beside its first seed's companions
        if kept.is_dir():
            folder = shutil.copytree(kept, tmp_path / "checkpoint")
        else:
            first = sorted((request.getfixturevalue("seeds") / target).iterdir())[0]
            path = folder_input(tmp_path, target, first)
            path.write_bytes(kept.read_bytes())
            folder = input_root(path, target)
        outcome = run_input(folder)
        assert outcome.passed, _described(outcome)
        return
    kept_suffix = "".join(kept.suffixes)  # a compressed input's two: .json.gz
    suffixes = [kept_suffix] if target != "text" or kept_suffix else [".json", ".jsonl", ".yaml", ".csv"]
    for suffix in suffixes:  # a text input atheris found has no suffix: it was hashed under each
        path = input_path(tmp_path / suffix.strip("."), target, suffix)
        path.write_bytes(kept.read_bytes())
        outcome = run_input(path)
        assert outcome.passed, _described(outcome)


@pytest.mark.parametrize("name", list(PROBES))
def test_each_hand_aimed_input_is_read_or_refused(name: str, tmp_path: Path) -> None:
    target, suffix, make = PROBES[name]
    made = make()
    if isinstance(made, dict):  # a folder's files, by name
        for file_name, data in made.items():
            (tmp_path / file_name).write_bytes(data)
        outcome = run_input(tmp_path)
    else:
        path = input_path(tmp_path, target, suffix)
        path.write_bytes(made)
        outcome = run_input(path)
    assert outcome.passed, _described(outcome)
