"""`reprobox hash` on files that change or take long: a signal stops it at once with hash's own sentence,
a file cut short while hashed is a sentence (never SIGBUS), and a name that is not UTF-8 prints."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hashing_process import cut_short_while_hashed, start_hash, wait_until_hashing

ROOT = Path(__file__).parents[2]
LARGE = 6 << 30  # a sparse file: no disk used, and hashing its zeros takes many seconds


def _sparse_npy(path: Path) -> Path:
    import numpy as np

    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, dtype=np.uint8))
    header["shape"] = (LARGE,)
    with path.open("wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.truncate(f.tell() + LARGE)
    return path


def _sparse_safetensors(path: Path) -> Path:
    header = f'{{"w":{{"dtype":"U8","shape":[{LARGE}],"data_offsets":[0,{LARGE}]}}}}'.encode()
    with path.open("wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(f.tell() + LARGE)
    return path


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_hashing_at_once_with_its_own_sentence(
    signum: signal.Signals, code: int, tmp_path: Path
) -> None:
    process = start_hash(_sparse_npy(tmp_path / "big.npy"))
    wait_until_hashing(process)
    sent = time.monotonic()
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert time.monotonic() - sent < 2.5
    assert process.returncode == code, stderr
    assert f"hashing stopped by {signum.name}" in stderr
    assert "run recorded as interrupted" not in stderr and "Traceback" not in stderr


@pytest.mark.parametrize("make", [_sparse_npy, _sparse_safetensors], ids=["npy", "safetensors"])
def test_a_file_cut_short_while_hashed_is_a_sentence(make: object, tmp_path: Path) -> None:
    assert callable(make)
    path = make(tmp_path / ("big.npy" if make is _sparse_npy else "big.safetensors"))
    cut_short_while_hashed(path)


def test_a_file_name_that_is_not_utf8_prints(tmp_path: Path) -> None:
    folder = os.fsencode(tmp_path)
    name = folder + b"/metrics-\xff.json"
    with open(name, "wb") as f:  # noqa: PTH123 - a bytes path
        f.write(b'{"loss": 0.5}')
    result = subprocess.run(
        [sys.executable, "-m", "reprobox", "hash", os.fsdecode(name)],
        cwd=ROOT,
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert b"metrics-\\udcff.json" in result.stdout
