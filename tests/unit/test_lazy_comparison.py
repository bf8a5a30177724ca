"""Comparison reads each tensor from its file by ``pread`` when it is looked up, never through a memory map.

A checkpoint cut short after its tensors were listed and before one is read must give a sentence naming
it, not kill the process with SIGBUS: those checks run in a subprocess, so a reader that still mapped
the file would show as a death by SIGBUS rather than a crashed test run.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from reprobox.guest.hashing import load_tensors
from reprobox.guest.hashing._canonical import ROOT_NAME

ROOT = Path(__file__).parents[2]


def _weight() -> torch.Tensor:
    return torch.arange(400_000, dtype=torch.float32).reshape(800, 500)  # over one pread chunk


def _torch_zip(path: Path) -> Path:
    weight = _weight()
    views = {"weight": weight, "transposed": weight.t(), "row": weight[7], "half": weight.bfloat16()}
    torch.save(views, path)
    return path


def _safetensors(path: Path) -> Path:
    weight = _weight()
    save_file({"weight": weight, "half": weight.bfloat16(), "ids": torch.arange(10)}, str(path))
    return path


def _npy(path: Path) -> Path:
    np.save(path, np.asfortranarray(np.arange(400_000, dtype=">f4").reshape(800, 500)))
    return path


def _expected(path: Path) -> dict[str, torch.Tensor]:
    """What the format's own library reads from the file."""
    if path.suffix == ".safetensors":
        return load_file(str(path))
    if path.suffix == ".npy":
        return {ROOT_NAME: torch.from_numpy(np.load(path).astype("<f4"))}
    loaded: dict[str, torch.Tensor] = torch.load(path, weights_only=True)
    return loaded


MAKERS: list[tuple[str, Callable[[Path], Path]]] = [
    ("model.pt", _torch_zip),
    ("model.safetensors", _safetensors),
    ("array.npy", _npy),
]


@pytest.mark.parametrize(("name", "make"), MAKERS, ids=["torch", "safetensors", "npy"])
def test_tensors_looked_up_one_by_one_equal_what_the_formats_own_library_reads(
    name: str, make: Callable[[Path], Path], tmp_path: Path
) -> None:
    path = make(tmp_path / name)
    tensors, _values = load_tensors(path)
    expected = _expected(path)
    assert isinstance(tensors, Mapping) and not isinstance(tensors, dict)
    assert sorted(tensors) == sorted(expected) and len(tensors) == len(expected)
    for key in tensors:
        assert key in tensors
        first = tensors[key]
        assert first.dtype == expected[key].dtype and torch.equal(first, expected[key]), key
        first.zero_()  # a fresh tensor per lookup: changing one leaves the next lookup as the file holds it
        assert torch.equal(tensors[key], expected[key]), key
    assert "absent" not in tensors and tensors.get("absent") is None


_CUT_AFTER_LISTING = textwrap.dedent(
    """
    import os, shutil, sys
    from pathlib import Path
    from reprobox import tensordiff
    from reprobox.errors import EnvironmentProblem
    from reprobox.guest.hashing import load_tensors
    from reprobox.guest.hashing._filebytes import FileChanged

    path, other = Path(sys.argv[1]), Path(sys.argv[2])
    shutil.copyfile(path, other)
    tensors, _ = load_tensors(path)
    os.truncate(path, path.stat().st_size // 2)
    try:
        for name in tensors:
            tensors[name].sum()  # touches every value, as comparing does
    except FileChanged as exc:
        print(f"lookup: {exc.filename}: {exc.strerror}")
    else:
        sys.exit("read the tensors of a file cut short")

    shutil.copyfile(other, path)

    def listed_then_cut(where):
        listed = load_tensors(where)
        if where == path:
            os.truncate(path, path.stat().st_size // 2)
        return listed

    tensordiff.load_tensors = listed_then_cut  # the cut falls between listing and the first lookup
    try:
        tensordiff.diff_checkpoint_files(path, other, checkpoint="c")
    except EnvironmentProblem as exc:
        print(f"compare: exit {exc.exit_code}: {exc.message}")
    else:
        sys.exit("compared a file cut short")
    """
)


@pytest.mark.parametrize(("name", "make"), MAKERS, ids=["torch", "safetensors", "npy"])
def test_a_file_cut_short_after_its_tensors_were_listed_is_a_sentence_not_sigbus(
    name: str, make: Callable[[Path], Path], tmp_path: Path
) -> None:
    path = make(tmp_path / name)
    result = subprocess.run(
        [sys.executable, "-c", _CUT_AFTER_LISTING, str(path), str(tmp_path / f"copy-{name}")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode != -signal.SIGBUS, "the process died of SIGBUS"
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"lookup: {path}: it changed while it was" in result.stdout
    sentence = f"compare: exit 4: cannot read checkpoint {path} (it changed while it was compared"
    assert sentence in result.stdout
