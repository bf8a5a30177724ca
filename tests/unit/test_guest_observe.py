"""The observed run's record of what the job imported survives the watch's stop: its Ctrl-C and
terminate often land while the job is already exiting, as the record is being written."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from reprobox.guest.observe import Observer


@pytest.fixture
def observer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Observer]:
    """An observer whose job imported `extpkg`, its repository's own package from above its folder."""
    package = tmp_path / "repo" / "extpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (tmp_path / "repo" / "scripts").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path / "repo"))
    import extpkg  # noqa: F401  # the import the job's code made

    watched = Observer(tmp_path / "observed.jsonl", str(tmp_path / "repo" / "scripts"))
    watched.job_imports |= {"extpkg", "pytest"}  # its own package, and an installed one
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield watched
    for sig, handler in saved.items():
        signal.signal(sig, handler)
    monkeypatch.delitem(sys.modules, "extpkg")


def recorded(observer: Observer) -> list[dict[str, str]]:
    return [json.loads(line) for line in observer.record.read_text().splitlines()]


def test_an_interrupt_during_the_record_starts_it_again(observer: Observer, monkeypatch) -> None:
    real = metadata.packages_distributions
    calls = []

    def interrupted_once() -> dict:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the watch's Ctrl-C, before the handler could ignore it
        return real()

    monkeypatch.setattr(metadata, "packages_distributions", interrupted_once)
    observer.imported()
    lines = recorded(observer)
    externals = [line for line in lines if "external" in line]
    assert externals == [{"external": "extpkg", "file": str(Path(sys.modules["extpkg"].__file__ or ""))}]
    assert len(calls) == 2 and any(line.get("distribution") == "pytest" for line in lines)


def test_the_watch_signals_are_ignored_while_it_records(observer: Observer, monkeypatch) -> None:
    real = metadata.packages_distributions

    def signalled() -> dict:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, then terminate, as the watch sends them
        os.kill(os.getpid(), signal.SIGTERM)
        return real()

    monkeypatch.setattr(metadata, "packages_distributions", signalled)
    observer.imported()  # neither interrupts it nor ends this process
    assert any(line.get("distribution") == "pytest" for line in recorded(observer))
    assert any("external" in line for line in recorded(observer))
