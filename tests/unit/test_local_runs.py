"""End to end on the local runtime: the guest's seeding reaches every process; faults are recorded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reprobox import cli
from reprobox.records.manifest import read_record
from reprobox.runner import list_runs

JOBS = Path(__file__).parents[1] / "jobs"
EXAMPLE = Path(__file__).parents[2] / "examples" / "tiny-mlp" / "job.yaml"


def run_cli(*args: str) -> int:
    return cli.main(list(args))


def only_run(runs_dir: Path, job: str) -> Path:
    (run_dir,) = list_runs(runs_dir, job)
    return run_dir


def test_shell_wrapped_python_processes_are_all_seeded(tmp_path: Path) -> None:
    assert (
        run_cli("run", str(JOBS / "shell-wrapped"), "--runtime", "local", "--runs-dir", str(tmp_path), "-q")
        == 0
    )
    outputs = only_run(tmp_path, "shell-wrapped") / "outputs"
    first = json.loads((outputs / "first.json").read_text())
    second = json.loads((outputs / "second.json").read_text())
    assert first == second  # two interpreters, same seed, same draws
    assert first["pythonhashseed"] == "1234"
    assert first["cublas"] == ":4096:8"
    assert first["deterministic"] and first["cudnn_deterministic"]
    assert not first["cudnn_benchmark"] and not first["tf32"]
    import random

    import numpy as np
    import torch

    random.seed(1234)
    np.random.seed(1234)
    torch.manual_seed(1234)
    assert first["random"] == random.random()
    assert first["numpy"] == float(np.random.rand())
    assert first["torch"] == float(torch.rand(1))


def test_spawned_dataloader_workers_get_the_hook(tmp_path: Path) -> None:
    assert (
        run_cli("run", str(JOBS / "spawn-workers"), "--runtime", "local", "--runs-dir", str(tmp_path), "-q")
        == 0
    )
    result = json.loads((only_run(tmp_path, "spawn-workers") / "outputs" / "workers.json").read_text())
    assert result["main_pid"] not in result["worker_pids"]
    assert result["workers_deterministic"]


def test_plain_python_without_torch_does_not_import_it(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.yaml").write_text(
        "version: 1\nname: no-torch\n"
        "command: [python, -c, \"import sys, os; open(os.environ['REPROBOX_OUTPUT_DIR'] + '/mods.txt', 'w')"
        ".write(str(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy'))))\"]\n"
    )
    assert run_cli("run", str(job), "--runtime", "local", "--runs-dir", str(tmp_path / "runs"), "-q") == 0
    assert (only_run(tmp_path / "runs", "no-torch") / "outputs" / "mods.txt").read_text() == "[]"


def test_nonzero_exit_is_a_failed_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli(
        "run", str(JOBS / "exit-nonzero"), "--runtime", "local", "--runs-dir", str(tmp_path), "--json"
    )
    assert code == 3
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "failed" and data["failure"] == "exited with status 7"
    record = read_record(data["run_dir"])
    assert record.data["exit_code"] == 7 and not record.succeeded
    assert "about to fail" in (record.run_dir / "stdout.log").read_text()


def test_killed_by_signal_is_recorded(tmp_path: Path) -> None:
    assert run_cli("run", str(JOBS / "killed"), "--runtime", "local", "--runs-dir", str(tmp_path), "-q") == 3
    record = read_record(only_run(tmp_path, "killed"))
    assert record.data["signal"] == signal.SIGKILL
    assert record.failure == "killed by signal SIGKILL"


def test_timeout_kills_everything_and_is_recorded(tmp_path: Path) -> None:
    started = time.monotonic()
    assert run_cli("run", str(JOBS / "timeout"), "--runtime", "local", "--runs-dir", str(tmp_path), "-q") == 3
    assert time.monotonic() - started < 15
    run_dir = only_run(tmp_path, "timeout")
    record = read_record(run_dir)
    assert record.data["timed_out"] and record.status == "failed"
    assert record.failure == "timed out after 1.5 s"
    pid = int((run_dir / "outputs" / "background.pid").read_text().split()[-1])
    assert not _alive(pid), "the job's background process outlived the timeout"


def test_background_processes_are_stopped_before_hashing(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.yaml").write_text("version: 1\nname: stray\ncommand: [bash, run.sh]\n")
    (job / "run.sh").write_text('sleep 300 &\necho $! > "$REPROBOX_OUTPUT_DIR/pid"\n')
    assert run_cli("run", str(job), "--runtime", "local", "--runs-dir", str(tmp_path / "runs"), "-q") == 0
    pid = int((only_run(tmp_path / "runs", "stray") / "outputs" / "pid").read_text())
    assert not _alive(pid)


def test_ctrl_c_during_verify_stops_the_job_and_records_interrupted(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.yaml").write_text("version: 1\nname: slow\ncommand: [bash, run.sh]\n")
    (job / "run.sh").write_text(
        'sleep 300 &\necho $! > "$REPROBOX_OUTPUT_DIR/pid"\npython -c "import time; time.sleep(300)"\n'
    )
    controller = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reprobox",
            "verify",
            str(job),
            "--runtime",
            "local",
            "--runs-dir",
            str(runs),
            "-q",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    pid_file = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and pid_file is None:
        found = list(runs.glob("slow/*/outputs/pid"))
        pid_file = found[0] if found and found[0].read_text().strip() else None
        time.sleep(0.1)
    assert pid_file is not None, "the job never started"
    controller.send_signal(signal.SIGINT)
    _, err = controller.communicate(timeout=30)
    assert controller.returncode == 130
    assert "Traceback" not in err
    record = read_record(pid_file.parents[1])
    assert record.status == "interrupted"
    assert not _alive(int(pid_file.read_text()))


def test_urandom_weights_are_not_reproducible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli(
        "verify", str(JOBS / "urandom"), "--runtime", "local", "--runs-dir", str(tmp_path), "--json", "-q"
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert data["verdict"] == "different"
    names = [d["name"] for d in data["differences"]]
    assert names == ["head.bias", "head.weight"]  # encoder.weight comes from the seeded torch RNG
    for difference in data["differences"]:
        assert difference["differing"] > 0 and difference["max_abs"] > 0
    # what README.md shows for this command
    assert data["sentence"] == "not reproducible: 2 tensors differ (first: head.bias in model.pt)"
    explanation = data["explanation"]["sentence"]
    assert explanation.startswith("same stack, different result: a real nondeterminism (max abs difference ")
    assert explanation.endswith(" over 2 tensors)")
    assert [(d["checkpoint"], d["differing"], d["total"]) for d in data["differences"]] == [
        ("model.pt", 16, 16),
        ("model.pt", 16, 16),
    ]


def test_example_verifies_bit_identical_three_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    attestation = tmp_path / "reprobox.attestation.json"
    code = run_cli(
        "verify", str(EXAMPLE), "--runs", "3", "--runtime", "local", "--runs-dir", str(tmp_path), "--json",
        "--attestation", str(attestation),
    )  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert code == 0, data
    assert data["verdict"] == "identical" and len(data["runs"]) == 3
    (checkpoint,) = data["checkpoints"]
    assert checkpoint["path"] == "model.pt" and checkpoint["identical"]
    assert len({r["content_sha256"] for r in checkpoint["runs"]}) == 1
    statement = json.loads(attestation.read_text())
    assert data["attestation"] == str(attestation)
    assert statement["subject"][0]["name"] == "model.pt"


def test_example_is_not_reproducible_under_plain_python(tmp_path: Path) -> None:
    from reprobox.guest.hashing import hash_checkpoint

    digests = []
    for attempt in ("a", "b"):
        out = tmp_path / attempt
        env = {k: v for k, v in os.environ.items() if not k.startswith(("REPROBOX_", "PYTHONHASHSEED"))}
        env["REPROBOX_OUTPUT_DIR"] = str(out)
        subprocess.run(
            [sys.executable, str(EXAMPLE.parent / "train.py"), "--epochs", "1"],
            env=env,
            check=True,
            capture_output=True,
        )
        digests.append(hash_checkpoint(out / "model.pt", relative_to=out).content_sha256)
    assert digests[0] != digests[1]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


JOB_REPORTS_ITS_INTERPRETER = """\
import json, os, random, sys
report = {
    "executable": sys.executable,
    "hook": os.path.dirname(sys.modules["reprobox"].__file__) if "reprobox" in sys.modules else None,
    "draw": random.random(),
}
with open(os.path.join(os.environ["REPROBOX_OUTPUT_DIR"], "where.json"), "w") as f:
    json.dump(report, f)
"""


@pytest.mark.skipif(not Path("/usr/bin/python3").is_file(), reason="needs a second interpreter")
def test_the_job_runs_the_python_its_path_finds_and_the_hook_reaches_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's `python` (here the system's, which has no reprobox installed) runs the job, seeded
    by the startup hook found through the guest's boot folder, not reprobox's own interpreter."""
    user_bin = tmp_path / "user-bin"
    user_bin.mkdir()
    (user_bin / "python").symlink_to("/usr/bin/python3")
    monkeypatch.setenv("PATH", f"{user_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    job = tmp_path / "job"
    job.mkdir()
    (job / "report.py").write_text(JOB_REPORTS_ITS_INTERPRETER)
    (job / "job.yaml").write_text("version: 1\nname: which-python\ncommand: [python, report.py]\nseed: 7\n")
    reports = []
    for runs in ("a", "b"):
        assert run_cli("run", str(job), "--runtime", "local", "--runs-dir", str(tmp_path / runs), "-q") == 0
        reports.append(
            json.loads((only_run(tmp_path / runs, "which-python") / "outputs" / "where.json").read_text())
        )

    first, second = reports
    assert Path(first["executable"]).resolve() == Path("/usr/bin/python3").resolve() != Path(sys.executable)
    assert first["hook"] is not None and not Path(first["hook"]).is_relative_to(
        sys.prefix
    )  # the boot folder's
    assert first["draw"] == second["draw"]  # seeded in the user's interpreter


def test_a_tool_environment_never_shadows_the_users_python(tmp_path: Path) -> None:
    from reprobox.runtimes.local.tool_environment import job_search_path, tool_scripts_folders

    tool = tmp_path / "pipx" / "venvs" / "reprobox"
    (tool / "bin").mkdir(parents=True)
    users = f"{tool / 'bin'}{os.pathsep}/home/me/project/.venv/bin{os.pathsep}/usr/bin"
    assert tool_scripts_folders(tool, tool / "bin" / "python") == frozenset()  # a venv of the user's own
    assert job_search_path(users, tool_scripts_folders(tool, tool / "bin" / "python")) == users

    (tool / "pipx_metadata.json").write_text("{}")
    folders = tool_scripts_folders(tool, tool / "bin" / "python")
    assert job_search_path(users, folders) == f"/home/me/project/.venv/bin{os.pathsep}/usr/bin"
    (tool / "pipx_metadata.json").unlink()
    (tool / "uv-receipt.toml").write_text("[tool]\n")
    assert job_search_path(users, tool_scripts_folders(tool, tool / "bin" / "python")).startswith("/home/me")
