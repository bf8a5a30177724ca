"""The startup hook's post-import callbacks fire when a watched module is imported, even after a library
has only asked whether it is installed (`importlib.util.find_spec`, as transformers, datasets and
accelerate ask about torch): such a probe finds a spec it never executes, and must not use the
callback up, or torch and NumPy are imported unseeded."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reprobox.guest import settings
from reprobox.guest.post_import import when_imported

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def watched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module of its own on sys.path, with the import machinery restored afterwards."""
    name = f"watched_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    yield name
    sys.modules.pop(name, None)


def test_a_probe_for_the_module_leaves_its_callback_for_the_import(watched: str) -> None:
    fired: list[str] = []
    when_imported(watched, lambda module: fired.append(module.__name__))
    assert importlib.util.find_spec(watched) is not None
    assert importlib.util.find_spec(watched) is not None
    assert fired == []
    importlib.import_module(watched)
    assert fired == [watched]
    importlib.reload(sys.modules[watched])
    assert fired == [watched]  # once per process


def test_a_module_that_fails_to_import_fires_nothing(watched: str, tmp_path: Path) -> None:
    fired: list[str] = []
    (tmp_path / f"{watched}.py").write_text("raise ImportError('not today')\n")
    when_imported(watched, lambda module: fired.append(module.__name__))
    with pytest.raises(ImportError, match="not today"):
        importlib.import_module(watched)
    assert fired == []


PROBED_THEN_IMPORTED = """
import importlib.util, sys
if sys.argv[1] == "probe":
    assert importlib.util.find_spec("numpy.random") is not None
import numpy
print(numpy.random.rand())
"""


def first_draw(probe: bool) -> str:
    """NumPy's first global draw in a process of a job (the startup hook active)."""
    env = {
        **os.environ,
        settings.HOOK_ACTIVE: "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "reprobox" / "guest" / "_boot"), str(ROOT)]),
    }
    argv = [sys.executable, "-c", PROBED_THEN_IMPORTED, "probe" if probe else "import"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_numpy_is_seeded_by_the_job_even_after_a_probe_for_it() -> None:
    assert first_draw(probe=True) == first_draw(probe=False)
