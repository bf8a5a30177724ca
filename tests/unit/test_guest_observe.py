"""The observed run's record of what the job imported survives the watch's stop: its Ctrl-C and
terminate often land while the job is already exiting, as the record is being written."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reprobox.guest.installed import Distribution, Installed
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
    real = Installed.distributions
    calls = []

    def interrupted_once(self: Installed) -> list[Distribution]:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the watch's Ctrl-C, before the handler could ignore it
        return real(self)

    monkeypatch.setattr(Installed, "distributions", interrupted_once)
    observer.imported()
    lines = recorded(observer)
    externals = [line for line in lines if "external" in line]
    assert externals == [{"external": "extpkg", "file": str(Path(sys.modules["extpkg"].__file__ or ""))}]
    assert len(calls) >= 2 and any(line.get("distribution") == "pytest" for line in lines)


def test_the_watch_signals_are_ignored_while_it_records(observer: Observer, monkeypatch) -> None:
    real = Installed.distributions

    def signalled(self: Installed) -> list[Distribution]:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, then terminate, as the watch sends them
        os.kill(os.getpid(), signal.SIGTERM)
        return real(self)

    monkeypatch.setattr(Installed, "distributions", signalled)
    observer.imported()  # neither interrupts it nor ends this process
    assert any(line.get("distribution") == "pytest" for line in recorded(observer))
    assert any("external" in line for line in recorded(observer))


def test_a_job_run_as_python_dash_m_is_observed(tmp_path: Path) -> None:
    """`python -m module` imports runpy before any Python frame exists: the observer's hook sees it too."""
    import subprocess

    import reprobox
    from reprobox.guest import settings

    (tmp_path / "trainmod.py").write_text("import colorsys\nprint('trained')\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    boot = Path(reprobox.__file__).parent / "guest" / "_boot"
    package_root = Path(reprobox.__file__).parent.parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(boot), str(package_root), str(tmp_path)]),
        settings.HOOK_ACTIVE: "1",
        settings.OBSERVE: "1",
        settings.RUN_DIR: str(run_dir),
        settings.CODE_DIR: str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "trainmod"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "trained"
    (record,) = (run_dir / settings.GUEST_STATE).glob("observed-*.jsonl")
    assert {"import": "colorsys"} in [json.loads(line) for line in record.read_text().splitlines()]
