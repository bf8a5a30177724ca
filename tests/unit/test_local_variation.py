"""The local runtime applies a `verify --vary` variation, records it, and refuses what it cannot."""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

import pytest

from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.guest.variation import find_libfaketime
from reprobox.jobfile import load_job
from reprobox.runtimes.base import RunOutcome, RunPlan, Variation
from reprobox.runtimes.local import LocalRuntime
from reprobox.runtimes.local._namespace import namespace_works
from reprobox.runtimes.stable_paths import layout_for

JOB = Path(__file__).parents[1] / "jobs" / "observes-host"
PROBE_ROOT = Path(tempfile.mkdtemp(prefix="reprobox-probe-")) / "root"
PROBE_ROOT.mkdir()
NAMESPACES = namespace_works(sys.executable, PROBE_ROOT)
needs_namespace = pytest.mark.skipif(not NAMESPACES, reason="this kernel refuses a private mount namespace")
ISOLATIONS = [pytest.param("namespace", marks=needs_namespace), "fixed"]


class Collect:
    def __init__(self) -> None:
        self.text = ""

    def write(self, chunk: bytes) -> None:
        self.text += chunk.decode(errors="replace")


@pytest.fixture(autouse=True)
def _job_python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def run(
    tmp_path: Path, variation: Variation, isolation: str = "namespace"
) -> tuple[RunOutcome, dict[str, object]]:
    run_dir = tmp_path / "run"
    (run_dir / "outputs").mkdir(parents=True)
    plan = RunPlan(
        job=load_job(JOB),
        run_id="r1",
        run_dir=run_dir,
        guest_env={},
        command=("python", "observe.py"),
        timeout=120,
        variation=variation,
    )
    sink = Collect()
    outcome = LocalRuntime(isolation=isolation).run(plan, sink)
    assert outcome.succeeded, sink.text
    seen: dict[str, object] = json.loads((run_dir / "outputs" / "observed.json").read_text())
    return outcome, seen


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_the_default_variation_changes_nothing_and_records_nothing(tmp_path: Path, isolation: str) -> None:
    outcome, seen = run(tmp_path, Variation(), isolation)
    layout = layout_for(load_job(JOB), os.getuid())
    assert "variation" not in outcome.runtime
    assert seen["hostname"] == socket.gethostname()
    assert seen["home"] == str(layout.home) and seen["cwd"] == str(layout.code)
    assert seen["umask"] == f"{_current_umask():03o}"
    assert abs(float(seen["time"]) - time.time()) < 60  # type: ignore[arg-type]


@needs_namespace
def test_hostname_is_the_jobs_own_and_the_host_keeps_its_own(tmp_path: Path) -> None:
    before = socket.gethostname()
    outcome, seen = run(tmp_path, Variation(hostname="elsewhere-7"))
    assert seen["hostname"] == "elsewhere-7"
    assert socket.gethostname() == before
    assert outcome.runtime["variation"] == {"hostname": "elsewhere-7"}


def test_hostname_is_refused_in_fixed_folders(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="hostname"):
        run(tmp_path, Variation(hostname="elsewhere-7"), "fixed")


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_umask_reaches_the_job_and_the_files_it_writes(tmp_path: Path, isolation: str) -> None:
    outcome, seen = run(tmp_path, Variation(umask=0o077), isolation)
    assert seen["umask"] == "077"
    assert seen["file_mode"] == "600"
    assert outcome.runtime["variation"] == {"umask": 0o077}


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_home_and_path_root_move_where_the_job_runs(tmp_path: Path, isolation: str) -> None:
    root, home = tmp_path / "elsewhere", tmp_path / "other-home"
    outcome, seen = run(tmp_path, Variation(path_root=str(root), home=str(home)), isolation)
    layout = layout_for(load_job(JOB), os.getuid(), base=root)
    assert seen["cwd"] == str(layout.code) and seen["output_dir"] == str(layout.outputs)
    assert seen["home"] == seen["home_expanded"] == str(home)
    assert outcome.runtime["paths"]["home"] == str(home)
    assert outcome.runtime["paths"]["code"] == str(layout.code)
    assert not home.exists()  # made for the run, removed after it
    assert (tmp_path / "run" / "outputs" / "observed.json").is_file()  # the results came home


@pytest.mark.skipif(
    find_libfaketime() is None, reason="libfaketime is not installed (apt-get install faketime)"
)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_clock_offset_shifts_the_jobs_wall_clock_only(tmp_path: Path, isolation: str) -> None:
    outcome, seen = run(tmp_path, Variation(clock_offset=86400.0), isolation)
    assert abs(float(seen["time"]) - time.time() - 86400) < 60  # type: ignore[arg-type]
    assert abs(float(seen["monotonic"]) - time.monotonic()) < 60  # type: ignore[arg-type]
    assert outcome.runtime["variation"] == {"clock_offset": 86400.0}
    guest = json.loads((tmp_path / "run" / ".reprobox" / "guest.json").read_text())
    assert guest["ended_at"] <= outcome.ended_at  # the guest's own records keep the real time


def test_a_variation_the_runtime_cannot_apply_is_refused(tmp_path: Path) -> None:
    assert "uid" not in LocalRuntime.variations
    with pytest.raises(UsageError, match="cannot vary uid"):
        run(tmp_path, Variation(uid=4242))


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
