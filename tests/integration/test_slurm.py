"""`--runtime slurm` against a real single-node Slurm (scripts/start-slurm.sh), never a fake sbatch.

Reruns side by side with node names recorded, a failing job recorded with Slurm's reason, a preempted
job recorded as preempted, and Ctrl-C on the controller leaves no job queued or running.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from reprobox import cli
from reprobox.records.manifest import read_record

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
DDP = ROOT / "examples" / "ddp" / "job.yaml"
START_HINT = "start the single-node test cluster with `scripts/start-slurm.sh`"


@pytest.fixture(scope="module", autouse=True)
def slurm() -> None:
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        pytest.skip(f"no Slurm here (sinfo is not on PATH); {START_HINT}")
    states = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, check=False)
    assert states.returncode == 0, f"sinfo does not answer: {states.stderr.strip()}; {START_HINT}"
    assert any(s.startswith(("idle", "mix", "alloc")) for s in states.stdout.split()), (
        f"no Slurm node is up ({states.stdout.split()}); {START_HINT}"
    )


@pytest.fixture
def unique_job(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A job file named uniquely, so its Slurm jobs (named after it) are this test's alone."""
    name = f"slurm-it-{uuid.uuid4().hex[:8]}"
    yield tmp_path / "job" / "job.yaml", name
    leftover = our_jobs(name, states="all_active")
    if leftover:
        subprocess.run(["scancel", *leftover], check=False)


def write_job(path: Path, name: str, command: str, *, timeout: int = 300) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"version: 1\nname: {name}\ncommand: {command}\ntimeout: {timeout}\n")
    return path


def our_jobs(name: str, *, states: str = "active") -> list[str]:
    """Ids of Slurm jobs of this job file; `active`: squeue's default (pending, running, completing...)."""
    options = [] if states in ("active", "all_active") else ["--states=all"]
    listed = subprocess.run(
        ["squeue", "-h", *options, "-o", "%i %j"], capture_output=True, text=True, check=True
    ).stdout
    return [line.split()[0] for line in listed.splitlines() if f"reprobox-{name}-" in line]


def manifests(runs_dir: Path, name: str) -> list[dict[str, object]]:
    return [json.loads(path.read_text()) for path in sorted((runs_dir / name).glob("2*/manifest.json"))]


def node_names() -> set[str]:
    listed = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True)
    return set(listed.stdout.split())


def test_verify_runs_side_by_side_on_slurm_and_records_the_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DDP example (2 gloo ranks per run), 2 runs at once: one CPU each, so they share the node."""
    monkeypatch.setenv("REPROBOX_SBATCH_ARGS", "--cpus-per-task=1")
    started = time.monotonic()
    arguments = ["verify", str(DDP), "--runtime", "slurm", "--runs", "2", "--parallel", "2"]
    code = cli.main([*arguments, "--runs-dir", str(tmp_path), "-q", "--no-attestation"])
    seconds = time.monotonic() - started
    assert code == 0
    records = [read_record(run) for run in sorted((tmp_path / "ddp").glob("2*"))]
    assert len(records) == 2 and all(record.succeeded for record in records)
    nodes = node_names()
    spans = []
    for record in records:
        slurm = record.data["runtime"]["slurm"]
        assert record.data["runtime"]["name"] == "slurm"
        assert slurm["state"] == "COMPLETED" and slurm["job_id"].isdigit()
        assert slurm["nodes"] in nodes and slurm["node"] == slurm["nodes"]
        fingerprint = record.data["fingerprint"]
        assert fingerprint["hardware"]["hostname"] == slurm["node"]
        assert {rank["hardware"]["hostname"] for rank in fingerprint["ranks"].values()} == {slurm["node"]}
        assert "world size 2" in (record.run_dir / "stdout.log").read_text()  # gathered from the node
        assert (record.run_dir / ".reprobox" / "slurm" / f"slurm-{slurm['job_id']}.out").exists()
        spans.append((datetime.fromisoformat(slurm["starttime"]), datetime.fromisoformat(slurm["endtime"])))
    (start_a, end_a), (start_b, end_b) = spans
    assert start_a < end_b and start_b < end_a, f"the runs did not overlap: {spans}"
    print(f"slurm verify --runs 2 --parallel 2 of the DDP example: {seconds:.1f} s")


def test_the_multi_node_path_runs_one_torchrun_agent_per_slurm_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nnodes: 2 through srun and the static rendezvous; the two "nodes" are two tasks on this node."""
    job = tmp_path / "job.yaml"
    text = DDP.read_text().replace("nproc_per_node: 2", "nproc_per_node: 1").replace("nnodes: 1", "nnodes: 2")
    job.write_text(text.replace("name: ddp", "name: ddp-two-nodes") + f"code: {DDP.parent}\n")
    monkeypatch.setenv("REPROBOX_SBATCH_ARGS", "--nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1")
    runs = tmp_path / "runs"
    assert cli.main(["run", str(job), "--runtime", "slurm", "--runs-dir", str(runs), "-q"]) == 0
    (run_dir,) = (runs / "ddp-two-nodes").glob("2*")
    record = read_record(run_dir)
    assert record.data["command"][:2] == ["srun", "--ntasks=2"]
    assert "--rdzv-backend=static" in record.data["command"]
    assert record.data["runtime"]["slurm"]["state"] == "COMPLETED"
    ranks = record.data["fingerprint"]["ranks"]
    assert ranks["1"]["software"]["distributed"] == {"rank": 1, "world_size": 2}
    assert "world size 2" in (run_dir / "stdout.log").read_text()


def test_docker_mode_runs_the_hardened_container_named_after_the_node(
    unique_job: tuple[Path, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    offline_base: str,
    wheelhouse: Path,
) -> None:
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)  # no registry here: the offline base
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))
    path, name = unique_job
    script = (
        "import os, socket; "
        "open(os.environ['REPROBOX_OUTPUT_DIR'] + '/host.txt', 'w').write(socket.gethostname())"
    )
    job = write_job(path, name, json.dumps(["python", "-c", script]))
    monkeypatch.setenv("REPROBOX_SLURM_CONTAINER", "docker")
    runs = tmp_path / "runs"
    assert cli.main(["run", str(job), "--runtime", "slurm", "--runs-dir", str(runs), "-q"]) == 0
    (manifest,) = manifests(runs, name)
    runtime = manifest["runtime"]
    assert isinstance(runtime, dict)
    node = runtime["slurm"]["node"]
    container = runtime["node_runtime"]["container"]
    assert runtime["mode"] == "docker" and container["hostname"] == node
    assert container["network_mode"] == "none" and container["read_only_rootfs"] is True
    assert manifest["fingerprint"]["hardware"]["hostname"] == node  # type: ignore[index]
    (run_dir,) = (runs / name).glob("2*")
    assert (run_dir / "outputs" / "host.txt").read_text() == node


def test_a_failing_job_is_recorded_failed_with_slurms_reason(
    unique_job: tuple[Path, str], tmp_path: Path
) -> None:
    path, name = unique_job
    job = write_job(path, name, "[python, -c, \"import sys; print('failing'); sys.exit(3)\"]")
    runs = tmp_path / "runs"
    assert cli.main(["run", str(job), "--runtime", "slurm", "--runs-dir", str(runs), "-q"]) == 3
    (manifest,) = manifests(runs, name)
    assert manifest["status"] == "failed" and manifest["exit_code"] == 3
    slurm = manifest["runtime"]["slurm"]  # type: ignore[index]
    assert slurm["state"] == "FAILED" and slurm["reason"] == "NonZeroExitCode"
    assert slurm["failure"] == "Slurm ended the job as FAILED (NonZeroExitCode)"
    (run_dir,) = (runs / name).glob("2*")
    assert "failing" in (run_dir / "stdout.log").read_text()


def test_a_preempted_job_is_recorded_failed_as_preempted(
    unique_job: tuple[Path, str], tmp_path: Path
) -> None:
    """scripts/start-slurm.sh's `urgent` partition preempts (cancels) jobs of the default one."""
    if subprocess.run(
        ["scontrol", "show", "partition", "urgent"], capture_output=True, check=False
    ).returncode:
        pytest.skip("needs the `urgent` partition of scripts/start-slurm.sh's test cluster")
    path, name = unique_job
    job = write_job(path, name, "[python, -c, \"import time; print('up', flush=True); time.sleep(300)\"]")
    runs = tmp_path / "runs"
    with Controller(["run", str(job), "--runtime", "slurm", "--runs-dir", str(runs)]) as controller:
        controller.wait_for(" RUNNING", count=1)
        cpus = subprocess.run(
            ["sinfo", "-h", "-p", "urgent", "-o", "%c"], capture_output=True, text=True, check=True
        )
        whole_node = f"--cpus-per-task={cpus.stdout.split()[0]}"
        urgent = subprocess.run(
            ["sbatch", "--parsable", "-p", "urgent", whole_node, "-o", "/dev/null", "--wrap", "sleep 1"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert controller.finish(timeout=120) == 3, controller.text
    (manifest,) = manifests(runs, name)
    assert manifest["status"] == "failed"
    slurm = manifest["runtime"]["slurm"]  # type: ignore[index]
    assert slurm["state"] == "PREEMPTED"
    assert slurm["failure"].startswith("Slurm ended the job as PREEMPTED (")
    assert our_jobs(name) == []
    subprocess.run(["scancel", urgent.stdout.strip()], check=False)


@pytest.mark.parametrize(
    "arguments",
    [["run"], ["verify", "--runs", "2", "--parallel", "2"]],
    ids=["run", "verify-parallel"],
)
def test_ctrl_c_on_the_controller_leaves_no_slurm_job(
    arguments: list[str], unique_job: tuple[Path, str], tmp_path: Path
) -> None:
    path, name = unique_job
    job = write_job(path, name, "[python, -c, \"import time; print('up', flush=True); time.sleep(300)\"]")
    runs = tmp_path / "runs"
    command, *options = arguments
    runs_expected = 2 if command == "verify" else 1
    arguments = [command, str(job), *options, "--runtime", "slurm", "--runs-dir", str(runs)]
    with Controller(arguments) as controller:
        controller.wait_for(" RUNNING", count=runs_expected)
        assert len(our_jobs(name)) == runs_expected
        controller.process.send_signal(signal.SIGINT)
        assert controller.finish(timeout=120) == 130, controller.text
    assert our_jobs(name) == [], "Slurm still lists a job of the interrupted controller"
    for manifest in manifests(runs, name):
        assert manifest["status"] in ("interrupted", "cancelled")
        slurm = manifest["runtime"]["slurm"]  # type: ignore[index]
        assert slurm["state"] == "CANCELLED" and slurm["cancel_confirmed"] is True


class Controller:
    """`reprobox ...` in a process of its own, its progress (stderr) read as it comes."""

    def __init__(self, arguments: list[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reprobox", *arguments],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        """A failed assertion must not leave the controller (and its Slurm jobs) running: interrupt
        it the way a user would, so it cancels what it submitted, and kill it if that does not end it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.finish(timeout=60)

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, words: str, *, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while sum(words in line for line in self.lines) < count:
            assert self.process.poll() is None, f"the controller ended early:\n{self.text}"
            assert time.monotonic() < deadline, f"no {count} x {words!r} within {timeout} s:\n{self.text}"
            time.sleep(0.1)

    def finish(self, *, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self.reader.join(timeout=5)
            if self.process.stderr is not None:
                self.process.stderr.close()


def test_sigterm_to_the_controller_cancels_the_slurm_job_and_records_it(
    unique_job: tuple[Path, str], tmp_path: Path
) -> None:
    path, name = unique_job
    job = write_job(
        path, name, "[python, -c, \"import time; print('started', flush=True); time.sleep(300)\"]"
    )
    runs = tmp_path / "runs"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reprobox",
            "run",
            str(job),
            "--runtime",
            "slurm",
            "--runs-dir",
            str(runs),
            "-q",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not any("started" in p.read_text(errors="replace") for p in runs.glob(f"{name}/*/stdout.log")):
            assert process.poll() is None, process.communicate()[1].decode()
            assert time.monotonic() < deadline, "the Slurm job never started"
            time.sleep(0.3)
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, err.decode()
    assert our_jobs(name) == []
    (manifest,) = manifests(runs, name)
    assert manifest["status"] == "interrupted"
