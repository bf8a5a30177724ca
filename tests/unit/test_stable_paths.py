"""The local runtime gives every run the same absolute paths: in a mount namespace, or in fixed folders."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from reprobox import cli
from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.guest import settings
from reprobox.jobfile import DataMount, load_job
from reprobox.records.manifest import read_record
from reprobox.runner import list_runs
from reprobox.runtimes.base import RunPlan
from reprobox.runtimes.docker._settings import container_paths, container_settings
from reprobox.runtimes.local import LocalRuntime
from reprobox.runtimes.local._namespace import namespace_works
from reprobox.runtimes.local.fixed_paths import (
    LOCK_FILE,
    OWNER_FILE,
    StagingStopped,
    copy_code,
    ensure_root,
    move_into,
    salvage,
    staged_run,
)
from reprobox.runtimes.stable_paths import job_environment, layout_for, user_root

JOBS = Path(__file__).parents[1] / "jobs"
JOB = JOBS / "saves-paths"
# The probe's mounts stay in its namespace; its memory goes beside a throwaway root, not into the tree.
_PROBE_ROOT = Path(tempfile.mkdtemp(prefix="reprobox-probe-")) / "root"
_PROBE_ROOT.mkdir()
NAMESPACES = namespace_works(sys.executable, _PROBE_ROOT)
needs_namespace = pytest.mark.skipif(not NAMESPACES, reason="this kernel refuses a private mount namespace")


@pytest.fixture(autouse=True)
def _job_python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The job's `python` is this interpreter, as in an activated environment."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def plan_for(job_dir: Path, run_dir: Path, reference: Path | None = None) -> RunPlan:
    (run_dir / "outputs").mkdir(parents=True)
    return RunPlan(
        job=load_job(job_dir),
        run_id="r1",
        run_dir=run_dir,
        guest_env={},
        command=("true",),
        timeout=None,
        reference_run=reference,
    )


# -- the layout -------------------------------------------------------------------------------------


def test_layout_is_one_fixed_folder_per_user_and_job() -> None:
    job = replace(load_job(JOB), data=(DataMount(source=Path("/srv/x"), target="/data/cifar", env="D"),))
    layout = layout_for(job, uid=1234)
    root = Path("/tmp/reprobox-1234/saves-paths")
    assert layout.root == root == user_root(1234) / "saves-paths"
    assert (layout.code, layout.run, layout.outputs) == (root / "code", root / "run", root / "run/outputs")
    assert (layout.home, layout.tmp) == (root / "home", root / "tmp")
    assert layout.data == {"/data/cifar": root / "mnt/data/cifar"}
    assert layout_for(job, uid=1234) == layout  # a pure function: the same on every node
    assert layout.to_json("fixed") == {
        "mode": "fixed",
        "code": str(root / "code"),
        "run": str(root / "run"),
        "outputs": str(root / "run/outputs"),
        "home": str(root / "home"),
        "tmp": str(root / "tmp"),
        "data": {"/data/cifar": str(root / "mnt/data/cifar")},
    }


def test_every_location_variable_points_into_the_layout() -> None:
    job = replace(load_job(JOB), data=(DataMount(source=Path("/srv/x"), target="/data", env="DATA_DIR"),))
    layout = layout_for(job, uid=0)
    host = {
        "HOME": "/home/u",
        "TMP": "/var/tmp",
        "XDG_CACHE_HOME": "/home/u/.cache",
        "OLDPWD": "/x",
        "A": "b",
    }
    env = job_environment(host, layout, job)
    assert env["HOME"] == str(layout.home)
    assert env["TMPDIR"] == env["TMP"] == str(layout.tmp)
    assert "TEMP" not in env  # only aliases the user had are overridden
    assert env["PWD"] == env[settings.CODE_DIR] == str(layout.code)
    assert env[settings.RUN_DIR] == str(layout.run)
    assert env[settings.OUTPUT_DIR] == str(layout.outputs)
    assert env["DATA_DIR"] == str(layout.data["/data"])
    assert "XDG_CACHE_HOME" not in env and "OLDPWD" not in env  # they would lead back to the real home
    assert env["A"] == "b"


def test_containers_record_their_own_paths_and_set_tmpdir(tmp_path: Path) -> None:
    job = replace(load_job(JOB), data=(DataMount(source=tmp_path, target="/data", env="DATA_DIR"),))
    plan = replace(plan_for(JOB, tmp_path / "run"), job=job)
    assert container_paths(plan) == {
        "mode": "container",
        "code": "/reprobox/code",
        "run": "/reprobox/run",
        "outputs": "/reprobox/run/outputs",
        "home": "/tmp",
        "tmp": "/tmp",
        "data": {"/data": "/data"},
    }
    assert (
        container_settings(plan, "sha256:abc", host_uid=1000, host_gid=1000)["environment"]["TMPDIR"]
        == "/tmp"
    )


def test_an_unknown_isolation_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPROBOX_LOCAL_ISOLATION", "chroot")
    with pytest.raises(UsageError, match="REPROBOX_LOCAL_ISOLATION='chroot' is not one of"):
        LocalRuntime()


def test_a_refused_namespace_falls_back_to_fixed_folders_unless_insisted(tmp_path: Path) -> None:
    python = str(tmp_path / "python-without-namespaces")
    assert not namespace_works(python, tmp_path)  # it cannot even start: refused
    layout = layout_for(load_job(JOB), uid=os.getuid())
    assert LocalRuntime(python=python).mode(layout) == "fixed"
    with pytest.raises(EnvironmentProblem, match="refuses a private mount namespace"):
        LocalRuntime(python=python, isolation="namespace").mode(layout)
    assert LocalRuntime(isolation="fixed").mode(layout) == "fixed"


def test_someone_elses_user_folder_is_refused(tmp_path: Path) -> None:
    layout = layout_for(load_job(JOB), uid=os.getuid(), base=tmp_path)
    layout.root.parent.parent.mkdir(exist_ok=True)
    layout.root.parent.symlink_to(tmp_path)  # planted by someone: not a folder we own
    with pytest.raises(EnvironmentProblem, match="is not a folder owned by uid"):
        ensure_root(layout, os.getuid())


# -- the guest's namespace ---------------------------------------------------------------------------


@needs_namespace
@pytest.mark.parametrize("user_namespace", [None, True])
def test_namespace_binds_code_read_only_and_the_run_dir_writable(
    tmp_path: Path, user_namespace: bool | None
) -> None:
    code, run, root = tmp_path / "code-src", tmp_path / "run-src", tmp_path / "root"
    for folder in (code, run, root):
        folder.mkdir()
    (code / "a.txt").write_text("code\n")
    spec = {
        "root": str(root),
        "cwd": str(root / "code"),
        "user_namespace": user_namespace,
        "mounts": [
            {"source": str(code), "target": str(root / "code"), "read_only": True},
            {"source": str(run), "target": str(root / "run"), "read_only": False},
        ],
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    script = (
        "import os, pathlib; print(os.getcwd()); print(pathlib.Path('a.txt').read_text().strip())\n"
        "try:\n    open('new', 'w')\nexcept OSError as e:\n    print(e.strerror)\n"
        "pathlib.Path('../run/out.txt').write_text('written inside')\n"
    )
    job = [sys.executable, "-c", script]
    enter_then_exec = (
        "import os, sys\nfrom reprobox.guest import namespace\n"
        "refused = namespace.enter(sys.argv[1])\nif refused: sys.exit(refused)\n"
        "os.execv(sys.argv[2], sys.argv[2:])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", enter_then_exec, str(tmp_path / "spec.json"), *job],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == [str(root / "code"), "code", "Read-only file system"]
    assert (run / "out.txt").read_text() == "written inside"  # the real run dir got it
    assert not (code / "new").exists()
    assert list(root.iterdir()) == []  # the host saw none of the mounts


def test_a_refused_namespace_names_the_step_and_the_way_out(tmp_path: Path) -> None:
    spec = {"root": str(tmp_path / "missing"), "cwd": "/", "mounts": []}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    result = subprocess.run(
        [sys.executable, "-m", "reprobox.guest", "--namespace", str(tmp_path / "spec.json"), "--", "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 125
    assert "REPROBOX_LOCAL_ISOLATION=fixed" in result.stderr


# -- fixed folders ----------------------------------------------------------------------------------


def test_code_copy_keeps_inner_links_and_links_big_folders(tmp_path: Path) -> None:
    source, outside = tmp_path / "src", tmp_path / "outside"
    (source / "pkg" / "__pycache__").mkdir(parents=True)
    (source / ".git").mkdir()
    (source / "runs").mkdir()
    outside.mkdir()
    (source / "pkg" / "m.py").write_text("x = 1\n")
    (source / "pkg" / "__pycache__" / "m.pyc").write_bytes(b"")
    (source / "inner").symlink_to("pkg/m.py")
    (source / "escape").symlink_to("../outside")
    copy = tmp_path / "copy"
    copy_code(source, copy, {(source / "runs").resolve()})
    assert (copy / "pkg" / "m.py").read_text() == "x = 1\n" and not (copy / "pkg" / "m.py").is_symlink()
    assert not (copy / "pkg" / "__pycache__").exists()
    assert (copy / "inner").readlink() == Path("pkg/m.py")
    assert (copy / "escape").readlink() == outside  # a relative link out of the tree would break
    assert (copy / ".git").readlink() == source / ".git"
    assert (copy / "runs").readlink() == source / "runs"


def test_moving_results_home_merges_folders_and_never_replaces_a_file(tmp_path: Path) -> None:
    fixed, real = tmp_path / "fixed", tmp_path / "real"
    (fixed / "outputs").mkdir(parents=True)
    (real / "outputs").mkdir(parents=True)
    (fixed / "outputs" / "ckpt.pt").write_text("weights")
    (fixed / "stdout.log").write_text("the job's own")
    (real / "stdout.log").write_text("the controller's")
    move_into(fixed, real)
    assert (real / "outputs" / "ckpt.pt").read_text() == "weights"
    assert (real / "stdout.log").read_text() == "the controller's"
    assert (real / "stdout.log.from-job").read_text() == "the job's own"
    assert list(fixed.iterdir()) == []


def test_a_run_whose_controller_died_is_moved_home_by_the_next(tmp_path: Path) -> None:
    layout = layout_for(load_job(JOB), uid=os.getuid(), base=tmp_path)
    (layout.run / "outputs").mkdir(parents=True)
    (layout.run / "outputs" / "late.pt").write_text("saved before the crash")
    orphan = tmp_path / "runs" / "saves-paths" / "r0"
    orphan.mkdir(parents=True)
    (layout.root / OWNER_FILE).write_text(json.dumps({"run_dir": str(orphan)}))
    salvage(layout)
    assert (orphan / "outputs" / "late.pt").read_text() == "saved before the crash"
    assert not (layout.root / OWNER_FILE).exists()


def test_a_stop_request_ends_the_wait_for_the_job_folder(tmp_path: Path) -> None:
    layout = layout_for(load_job(JOB), uid=os.getuid(), base=tmp_path)
    ensure_root(layout, os.getuid())
    plan = plan_for(JOB, tmp_path / "runs" / "saves-paths" / "r1")
    with (layout.root / LOCK_FILE).open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another run holds the job's folder
        with pytest.raises(StagingStopped), staged_run(layout, plan, lambda: True):
            pytest.fail("the run must not start while another holds the folder")


def test_fixed_folders_are_emptied_and_results_moved_home_when_the_body_fails(tmp_path: Path) -> None:
    layout = layout_for(load_job(JOB), uid=os.getuid(), base=tmp_path)
    ensure_root(layout, os.getuid())
    plan = plan_for(JOB, tmp_path / "runs" / "saves-paths" / "r1")
    with pytest.raises(KeyboardInterrupt), staged_run(layout, plan, lambda: False):
        assert (layout.code / "train.py").is_file() and not (layout.code / "train.py").is_symlink()
        assert (layout.data["/data"] / "scale.txt").read_text() == "3.5\n"
        (layout.outputs / "half.pt").write_text("half a checkpoint")
        raise KeyboardInterrupt
    assert (plan.run_dir / "outputs" / "half.pt").read_text() == "half a checkpoint"
    assert sorted(p.name for p in layout.root.iterdir()) == [LOCK_FILE]


# -- real runs --------------------------------------------------------------------------------------


def verify(runs_dir: Path, *extra: str) -> int:
    common = ["--runtime", "local", "--runs-dir", str(runs_dir), "--runs", "2", "-q", "--no-attestation"]
    return cli.main(["verify", str(JOB), *common, *extra])


def seen_by(run_dir: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((run_dir / "outputs" / "paths.json").read_text())
    return data


@pytest.mark.parametrize(
    ("isolation", "extra"),
    [
        pytest.param("namespace", (), marks=needs_namespace, id="namespace"),
        pytest.param("namespace", ("--parallel", "2"), marks=needs_namespace, id="namespace-parallel"),
        pytest.param("fixed", ("--parallel", "2"), id="fixed-parallel"),
    ],
)
def test_runs_see_the_same_paths_and_write_into_their_own_run_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolation: str, extra: tuple[str, ...]
) -> None:
    monkeypatch.setenv("REPROBOX_LOCAL_ISOLATION", isolation)
    assert verify(tmp_path, *extra) == 0  # the saved paths are equal, so the checkpoints are too
    runs = list_runs(tmp_path, "saves-paths")
    assert len(runs) == 2
    first, second = (seen_by(run) for run in runs)
    assert first == second
    layout = layout_for(load_job(JOB), uid=os.getuid())
    assert first["cwd"] == first["pwd"] == first["code_dir"] == first["sys_path0"] == str(layout.code)
    assert first["file"] == str(layout.code / "train.py")
    assert first["helper"] == str(layout.code / "helper.py")
    assert first["home"] == first["home_expanded"] == str(layout.home)
    assert first["home_entries"] == []  # fresh: the other run's marker is not there
    assert first["tmpdir"] == first["gettempdir"] == first["mkdtemp_parent"] == str(layout.tmp)
    assert "marker" not in first["tmp_entries"]  # type: ignore[operator]
    assert first["run_dir"] == str(layout.run) and first["output_dir"] == str(layout.outputs)
    assert first["data_dir"] == str(layout.data["/data"]) and first["data"] == "3.5"
    for run in runs:
        record = read_record(run)
        assert record.data["runtime"]["paths"] == layout.to_json(isolation)
        assert (run / settings.GUEST_STATE / settings.GUEST_RESULT).is_file()
        assert (run / "outputs" / "model.pkl").is_file()
        assert f"run {record.data['run_id']} writes into {layout.outputs}" in (run / "stdout.log").read_text()
    if isolation == "fixed":  # runs took turns, and left nothing behind in the fixed folder
        spans = sorted(
            (guest["started_at"], guest["ended_at"])
            for guest in (json.loads((run / ".reprobox" / "guest.json").read_text()) for run in runs)
        )
        assert spans[0][1] <= spans[1][0]
        assert not layout.run.exists() and not layout.code.exists()


def run_locally(tmp_path: Path, job_yaml: str) -> tuple[int, Path]:
    """``tmp_path/job`` given ``job_yaml``, run once by `reprobox run --runtime local`: its exit code and
    the run dir it made."""
    job, runs_dir = tmp_path / "job", tmp_path / "runs"
    job.mkdir(exist_ok=True)
    (job / "job.yaml").write_text(job_yaml)
    code = cli.main(["run", str(job), "--runtime", "local", "--runs-dir", str(runs_dir), "-q"])
    (run,) = list_runs(runs_dir, load_job(job).name)
    return code, run


def test_a_failing_job_in_fixed_folders_keeps_its_log_and_guest_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPROBOX_LOCAL_ISOLATION", "fixed")
    code, run = run_locally(
        tmp_path,
        "version: 1\nname: fails-in-fixed\n"
        "command: [python, -c, \"import os, sys; print('failing now', flush=True); "
        "open(os.environ['REPROBOX_OUTPUT_DIR'] + '/partial.txt', 'w').write(os.getcwd()); sys.exit(3)\"]\n",
    )
    assert code == 3
    layout = layout_for(load_job(tmp_path / "job"), uid=os.getuid())
    assert "failing now" in (run / "stdout.log").read_text()
    assert json.loads((run / ".reprobox" / "guest.json").read_text())["exit_code"] == 3
    assert (run / "outputs" / "partial.txt").read_text() == str(layout.code)
    assert read_record(run).data["runtime"]["paths"]["mode"] == "fixed"
    assert not layout.run.exists()


@pytest.mark.parametrize(
    "isolation", [pytest.param("namespace", marks=needs_namespace), pytest.param("fixed")]
)
def test_the_guest_imports_nothing_from_the_jobs_code_or_what_the_job_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolation: str
) -> None:
    """The guest starts in the job's code folder (fixed) or its run folder (namespace), and imports
    hashing's readers after the job: a `csv.py` there must not stand in for the standard library's."""
    monkeypatch.setenv("REPROBOX_LOCAL_ISOLATION", isolation)
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "csv.py").write_text("raise RuntimeError('the guest imported this csv.py')\n")
    code, run = run_locally(
        tmp_path,
        "version: 1\nname: shadows-stdlib\ncheckpoints: ['*.json']\n"
        "command: [python, -c, \"import os; o = os.environ['REPROBOX_OUTPUT_DIR']; "
        "open(o + '/metrics.json', 'w').write('{\\\"loss\\\": 0.5}'); "
        "open(o + '/../csv.py', 'w').write('raise SystemExit(9)')\"]\n",
    )
    assert code == 0
    assert (run / "csv.py").is_file()  # the job did plant one beside its outputs
    (checkpoint,) = read_record(run).data["checkpoints"]
    assert checkpoint["format"] == "json" and list(checkpoint["metadata"]) == ["loss"]


def test_ctrl_c_in_fixed_folders_still_moves_what_the_run_wrote_home(tmp_path: Path) -> None:
    job, runs_dir = tmp_path / "job", tmp_path / "runs"
    job.mkdir()
    (job / "job.yaml").write_text(
        "version: 1\nname: interrupted-in-fixed\n"
        "command: [python, -c, \"import os, time; open(os.environ['REPROBOX_OUTPUT_DIR'] + '/early.pt', 'w')"
        ".write('saved'); print('saved', flush=True); time.sleep(300)\"]\n"
    )
    controller = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reprobox",
            "run",
            str(job),
            "--runtime",
            "local",
            "--runs-dir",
            str(runs_dir),
            "-q",
        ],
        env={**os.environ, "REPROBOX_LOCAL_ISOLATION": "fixed"},
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    logs: list[Path] = []
    while time.monotonic() < deadline and not any("saved" in log.read_text() for log in logs):
        logs = list(runs_dir.glob("interrupted-in-fixed/*/stdout.log"))
        time.sleep(0.1)
    assert logs, "the job never started"
    controller.send_signal(signal.SIGINT)
    _, err = controller.communicate(timeout=30)
    assert controller.returncode == 130, err
    run = logs[0].parent
    assert read_record(run).status == "interrupted"
    assert (run / "outputs" / "early.pt").read_text() == "saved"
    assert not layout_for(load_job(job), uid=os.getuid()).run.exists()
