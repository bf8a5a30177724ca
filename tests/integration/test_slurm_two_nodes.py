"""`--runtime slurm` on a real two-node cluster: scripts/start-slurm.sh --nodes 2 (a slurmd per node, each
in its own network and UTS namespace on one machine), never a fake sbatch.

A two-node torchrun job bit-identical across reruns placed on the nodes in different orders, an FSDP job
saved with torch.distributed.checkpoint likewise and the same tensors by content on one node (and, cut
otherwise, on one rank: a reshard), runs side by side on different nodes with a node set up to differ
named as a different stack, a node lost mid-run recorded as Slurm's NODE_FAIL with nothing left behind,
and a job no partition can hold refused up front.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import doc_examples
import pytest

from reprobox import cli
from reprobox.records.manifest import read_record

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
DDP = ROOT / "examples" / "ddp"
RUNTIMES_DOC = ROOT / "docs" / "runtimes.md"
START = ROOT / "scripts" / "start-slurm.sh"
CONF = "/etc/slurm-nodes/slurm.conf"
NODES = ("rbx-node1", "rbx-node2")
PID_FILE = "/run/slurm-nodes/slurmd-{}.pid"
START_HINT = "start it with `scripts/start-slurm.sh --nodes 2` (as root)"


def start_cluster() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(START), "--nodes", "2"], capture_output=True, text=True, check=False, timeout=180
    )


@pytest.fixture(scope="module", autouse=True)
def two_nodes() -> Iterator[None]:
    """The two-node cluster answers (started here when this is root: idempotent, quick when up); every
    Slurm command of the tests and of reprobox talks to it, and the nodes find torchrun on PATH."""
    if shutil.which("sbatch") is None:
        pytest.skip(f"no Slurm here (sbatch is not on PATH); {START_HINT}")
    if not Path(CONF).exists() and os.geteuid() != 0:
        pytest.skip(f"no two-node cluster here ({CONF} is missing); {START_HINT}")
    started = start_cluster() if os.geteuid() == 0 else None
    assert started is None or started.returncode == 0, started.stderr
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLURM_CONF", CONF)
        patch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        patch.delenv("REPROBOX_SBATCH_ARGS", raising=False)
        yield


def two_node_job(folder: Path, name: str, *, epochs: int = 1) -> Path:
    """examples/ddp/two-nodes.yaml (2 nodes x 1 gloo rank, as docs/runtimes.md runs it), named apart and
    trained for ``epochs``."""
    text = (DDP / "two-nodes.yaml").read_text()
    assert "name: ddp-two-nodes\n" in text and '--epochs, "3"' in text
    text = text.replace("name: ddp-two-nodes", f"name: {name}").replace(
        '--epochs, "3"', f'--epochs, "{epochs}"'
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.yaml").write_text(text + f"code: {DDP}\n")
    return folder / "job.yaml"


def run_records(runs: Path, name: str) -> list[dict[str, object]]:
    return [read_record(run).data for run in sorted((runs / name).glob("2*"))]


def netns_pids(node: str) -> set[int]:
    listed = subprocess.run(["ip", "netns", "pids", node], capture_output=True, text=True, check=True)
    return {int(pid) for pid in listed.stdout.split()}


def slurmd_pid(node: str) -> int:
    return int(Path(PID_FILE.format(node)).read_text().strip())


def test_a_two_node_ddp_job_is_bit_identical_across_reruns_on_different_node_orders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"ddp-2n-{uuid.uuid4().hex[:6]}"
    job = two_node_job(tmp_path / "job", name)
    runs = tmp_path / "runs"
    started = time.monotonic()
    code = cli.main(
        ["verify", str(job), "--runtime", "slurm", "--runs", "2", "--runs-dir", str(runs), "-q", "--json"]
    )
    seconds = time.monotonic() - started
    assert code == 0
    sentence = json.loads(capsys.readouterr().out)["sentence"]
    assert sentence == "bit-identical: every output file is byte for byte the same across 2 runs"  # the docs'
    orders = []
    for data in run_records(runs, name):
        slurm = data["runtime"]["slurm"]  # type: ignore[index]
        assert slurm["state"] == "COMPLETED" and slurm["numnodes"] == "2"
        order = slurm["node_order"]  # node rank k ran on order[k]
        assert sorted(order) == list(NODES)
        ranks = data["fingerprint"]["ranks"]  # type: ignore[index]
        assert {rank: ranks[rank]["hardware"]["hostname"] for rank in ranks} == {"0": order[0], "1": order[1]}
        assert {rank: ranks[rank]["software"]["distributed"]["rank"] for rank in ranks} == {"0": 0, "1": 1}
        orders.append(order)
    assert orders[0] != orders[1], f"both reruns placed their ranks alike: {orders}"
    print(f"two-node verify --runs 2 (2 nodes x 1 gloo rank): {seconds:.1f} s; node orders {orders}")


def fsdp_example() -> doc_examples.Example:
    """The block of docs/runtimes.md that verifies examples/fsdp on two nodes and compares its reruns."""
    (example,) = [
        example
        for example in doc_examples.examples(RUNTIMES_DOC)
        if any("examples/fsdp/job.yaml" in command.text for command in example.commands)
    ]
    return example


def compared(run_a: Path, run_b: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert cli.main(["compare", str(run_a), str(run_b), "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_an_fsdp_job_saved_with_dcp_reproduces_in_any_node_order_and_on_one_node_as_the_docs_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/runtimes.md's block run as written (two reruns over two nodes, one on one node with two ranks,
    one on one rank); then what it shows, checked in the records: the node orders, the shards' bytes, and
    compare's account of the reshard."""
    example = fsdp_example()
    workspaces = doc_examples.Workspaces(tmp_path)
    started = time.monotonic()
    failure = workspaces.run(example)
    seconds = time.monotonic() - started
    assert failure is None, failure
    runs = workspaces.done[example.where] / "runs"
    two_nodes = sorted((runs / "fsdp").glob("2*"))
    (one_node,) = sorted((runs / "fsdp-one-node").glob("2*"))
    (one_rank,) = sorted((runs / "fsdp-one-rank").glob("2*"))
    orders = []
    for run in two_nodes:
        slurm = read_record(run).data["runtime"]["slurm"]
        assert slurm["state"] == "COMPLETED" and slurm["numnodes"] == "2"
        orders.append(slurm["node_order"])
    assert orders[0] != orders[1], f"both reruns placed their ranks alike: {orders}"
    placed = read_record(one_node).data
    assert placed["runtime"]["slurm"]["numnodes"] == "1"
    assert len({rank["hardware"]["hostname"] for rank in placed["fingerprint"]["ranks"].values()}) == 1
    shards = ("checkpoint/__0_0.distcp", "checkpoint/__1_0.distcp")
    saved = {
        tuple((run / "outputs" / shard).read_bytes() for shard in shards) for run in [*two_nodes, one_node]
    }
    assert len(saved) == 1, "the shards of the runs on two nodes and on one node differ"

    same_layout = compared(two_nodes[0], one_node, capsys)
    assert same_layout["grade"] == "reproduced" and same_layout["resharded"] == []
    assert sorted(e["name"] for e in same_layout["run_specific"]) == [
        "storage_meta.checkpoint_id",  # each run's own outputs folder
        "storage_meta.save_id",  # drawn by each save, in the run's record of its draws
    ]
    resharded = compared(two_nodes[0], one_rank, capsys)
    assert resharded["grade"] == "reproduced" and resharded["differences"] == []
    (layout,) = resharded["resharded"]
    assert (layout["a"]["shards"], layout["b"]["shards"]) == (
        ["__0_0.distcp", "__1_0.distcp"],
        ["__0_0.distcp"],
    )
    assert layout["tensors"] == 24 and layout["differing_tensors"] == 0  # 6 weights and biases, AdamW's 18
    print(f"docs/runtimes.md's FSDP block (four Slurm runs, two compares): {seconds:.1f} s; {orders}")


@contextlib.contextmanager
def one_cpu_on(node: str) -> Iterator[None]:
    """Every thread of the node's slurmd (so every job it starts) limited to CPU 0: a smaller node."""
    tasks = Path(f"/proc/{slurmd_pid(node)}/task")
    everything = os.sched_getaffinity(slurmd_pid(node))
    for thread in tasks.iterdir():
        os.sched_setaffinity(int(thread.name), {0})
    try:
        yield
    finally:
        for thread in tasks.iterdir():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(int(thread.name), everything)


def test_parallel_runs_go_to_both_nodes_at_once_and_a_smaller_node_is_a_different_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each run asks for both CPUs of a node, so Slurm must put the two on different nodes; the job writes
    what its node gives it, and the explanation names the node that differs rather than nondeterminism."""
    if os.geteuid() != 0:
        pytest.skip("changing a node's CPUs needs root")
    name = f"spread-{uuid.uuid4().hex[:6]}"
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "job.yaml").write_text(
        f"version: 1\nname: {name}\ntimeout: 120\nresources:\n  cpus: 2\ncheckpoints: ['*.txt']\n"
        'command: [python, -c, "import os, time, torch; time.sleep(3); threads = torch.get_num_threads(); '
        "open(os.environ['REPROBOX_OUTPUT_DIR'] + '/cores.txt', 'w').write(str(threads))\"]\n"
    )
    runs = tmp_path / "runs"
    with one_cpu_on("rbx-node2"):
        arguments = ["verify", str(folder / "job.yaml"), "--runtime", "slurm", "--runs", "2", "--parallel=2"]
        code = cli.main([*arguments, "--runs-dir", str(runs), "--json", "-q", "--no-attestation"])
    assert code == 1  # the outputs differ: the job wrote the thread count torch took from its node
    result = json.loads(capsys.readouterr().out)
    records = run_records(runs, name)
    placed = [record["runtime"]["slurm"] for record in records]  # type: ignore[index]
    assert sorted(slurm["nodes"] for slurm in placed) == list(NODES)
    spans = [(datetime.fromisoformat(s["starttime"]), datetime.fromisoformat(s["endtime"])) for s in placed]
    (start_a, end_a), (start_b, end_b) = spans
    assert start_a < end_b and start_b < end_a, f"Slurm ran them one after the other: {spans}"
    explanation = result["explanation"]
    assert explanation["same_stack"] is False, result
    assert explanation["sentence"].startswith("different stack"), result
    fields = {field["field"]: (field["a"], field["b"]) for field in explanation["fields"]}
    assert sorted(fields["hardware.cpu.usable_cores"]) == [1, 2]
    assert sorted(fields["hardware.hostname"]) == list(NODES)


def test_a_node_lost_mid_run_fails_the_run_as_node_fail_and_leaves_nothing(tmp_path: Path) -> None:
    """rbx-node2 torn down (every process in it killed, its namespace deleted) while both ranks run."""
    if os.geteuid() != 0:
        pytest.skip("tearing a node down needs root")
    name = f"lost-{uuid.uuid4().hex[:6]}"
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "job.yaml").write_text(
        f"version: 1\nname: {name}\ntimeout: 300\n"
        "launcher: {type: torchrun, nproc_per_node: 1, nnodes: 2}\n"
        "command: [python, -c, \"import time; print('training', flush=True); time.sleep(240)\"]\n"
    )
    runs = tmp_path / "runs"
    before = _leftovers(runs)  # a container another controller left on this engine is not this run's
    command = [sys.executable, "-m", "reprobox", "run", str(folder / "job.yaml"), "--runtime", "slurm"]
    process = subprocess.Popen(
        [*command, "--runs-dir", str(runs), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    survivor = "rbx-node1"
    try:
        deadline = time.monotonic() + 120
        logs = runs / name
        while (
            sum(log.read_text(errors="replace").count("training") for log in logs.glob("2*/stdout.log")) < 2
        ):
            assert process.poll() is None, process.communicate()[1].decode()
            assert time.monotonic() < deadline, "the two ranks never started"
            time.sleep(0.3)
        for pid in netns_pids("rbx-node2"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        subprocess.run(["ip", "netns", "delete", "rbx-node2"], check=True)
        _out, err = process.communicate(timeout=150)
        assert process.returncode == 3, err.decode()
        assert netns_pids(survivor) == {slurmd_pid(survivor)}, "processes of the job outlived it"
    finally:
        if process.poll() is None:
            process.kill()
        restarted = start_cluster()  # whatever the body did: the next tests need both nodes
    assert restarted.returncode == 0, restarted.stderr
    (data,) = run_records(runs, name)
    assert data["status"] == "failed"
    slurm = data["runtime"]["slurm"]  # type: ignore[index]
    assert slurm["state"] == "NODE_FAIL" and slurm["reason"], slurm
    # the scheduler's account leads: the signal the job died of follows it
    assert str(data["failure"]).startswith("Slurm ended the job as NODE_FAIL"), data["failure"]
    assert "rbx-node2" in str(data["failure"])
    assert _leftovers(runs) <= before, "the lost node's run left something `reprobox clean` would remove"


def _leftovers(runs: Path) -> set[str]:
    """What `reprobox clean --dry-run` would remove (containers are the engine's, whatever left them)."""
    listed = subprocess.run(
        [sys.executable, "-m", "reprobox", "clean", "--dry-run", "--json", "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        check=True,
    )
    return {f"{item['kind']} {item['target']}" for item in json.loads(listed.stdout)["leftovers"]}


def test_a_job_needing_more_nodes_than_exist_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"three-{uuid.uuid4().hex[:6]}"
    job = two_node_job(tmp_path / "job", name)
    job.write_text(job.read_text().replace("nnodes: 2", "nnodes: 3"))
    runs = tmp_path / "runs"
    assert cli.main(["verify", str(job), "--runtime", "slurm", "--runs", "2", "--runs-dir", str(runs)]) == 2
    said = capsys.readouterr().err.strip()
    assert len(said.splitlines()) == 1 and "launcher.nnodes" in said and str(job) in said, said
    assert not runs.exists()
    queued = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True, check=True).stdout
    assert name not in queued
