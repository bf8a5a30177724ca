"""A library another thread is still importing counts as not imported (hashing asks from many threads)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from reprobox.guest.hashing._loaded import loaded


def test_a_module_whose_import_has_not_finished_is_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "slow_library.py").write_text(
        "import reprobox_test_gate\n"
        "reprobox_test_gate.started.set()\n"
        "reprobox_test_gate.release.wait(10)\n"
        "ndarray = object\n"
    )
    gate = type(sys)("reprobox_test_gate")
    gate.started, gate.release = threading.Event(), threading.Event()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "reprobox_test_gate", gate)
    monkeypatch.syspath_prepend(str(tmp_path))
    importer = threading.Thread(target=lambda: __import__("slow_library"))
    importer.start()
    try:
        assert gate.started.wait(10)  # type: ignore[attr-defined]
        assert "slow_library" in sys.modules  # half-initialised, as NumPy is while a worker imports it
        assert loaded("slow_library") is None
    finally:
        gate.release.set()  # type: ignore[attr-defined]
        importer.join(10)
    module = loaded("slow_library")
    assert module is not None and module.ndarray is object
    monkeypatch.delitem(sys.modules, "slow_library")


def test_imported_modules_and_absent_ones() -> None:
    assert loaded("sys") is sys
    assert loaded("a_module_nobody_imported") is None
