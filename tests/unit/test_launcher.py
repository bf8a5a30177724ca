"""job.yaml launcher -> the command a run starts: torchrun's options pin the rank layout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reprobox.guest.settings import expand_variables
from reprobox.jobfile import JobSpec, Launcher, load_job
from reprobox.runtimes.launcher import launch_command, training_arguments

EXAMPLE = Path(__file__).parents[2] / "examples" / "ddp" / "job.yaml"


def job_with(command: tuple[str, ...], launcher: Launcher) -> JobSpec:
    here = Path(__file__).parent
    return JobSpec(job_file=here / "job.yaml", name="t", command=command, code=here, launcher=launcher)


def test_no_launcher_runs_the_command_as_written() -> None:
    job = job_with(("python", "train.py", "--epochs", "3"), Launcher())
    assert launch_command(job) == ("python", "train.py", "--epochs", "3")


def test_single_node_is_standalone_on_the_loopback_and_never_restarts() -> None:
    job = job_with(("python", "train.py", "--epochs", "3"), Launcher("torchrun", nproc_per_node=4))
    assert launch_command(job) == (
        "torchrun",
        "--standalone",
        "--nnodes=1",
        "--nproc-per-node=4",
        "--local-addr=127.0.0.1",
        "--max-restarts=0",
        "train.py",
        "--epochs",
        "3",
    )


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (("python", "train.py"), ("train.py",)),
        (("python3.11", "-m", "pkg.train", "--lr", "1"), ("-m", "pkg.train", "--lr", "1")),
        (("/usr/bin/python3", "train.py"), ("train.py",)),
        (("python", "-u", "train.py"), ("--no-python", "python", "-u", "train.py")),
        (("bash", "run.sh"), ("--no-python", "bash", "run.sh")),
        (("python",), ("--no-python", "python")),
        (("pythonista", "x"), ("--no-python", "pythonista", "x")),
    ],
)
def test_training_arguments(command: tuple[str, ...], expected: tuple[str, ...]) -> None:
    assert training_arguments(command) == expected


def test_torchrun_accepts_what_the_launcher_renders() -> None:
    """torchrun's own parser reads the options as meant (a renamed option would fail here)."""
    from torch.distributed.run import get_args_parser

    job = job_with(("python", "-m", "pkg.train", "--lr", "1"), Launcher("torchrun", nproc_per_node=2))
    args = get_args_parser().parse_args(list(launch_command(job)[1:]))
    assert args.standalone and args.nnodes == "1" and args.nproc_per_node == "2"
    assert args.max_restarts == 0 and args.local_addr == "127.0.0.1"
    assert args.module and args.training_script == "pkg.train" and args.training_script_args == ["--lr", "1"]


def test_multi_node_uses_srun_and_the_static_rendezvous_with_slurm_task_ranks() -> None:
    job = job_with(("python", "train.py"), Launcher("torchrun", nproc_per_node=8, nnodes=4))
    command = launch_command(job)
    assert command[:2] == ("srun", "--ntasks=4")
    assert "--kill-on-bad-exit=1" in command
    # The guest expands ${VAR} and $$ on the batch host; the node rank must stay for each task's shell.
    expanded = [
        expand_variables(part, {"REPROBOX_MASTER_ADDR": "node1", "REPROBOX_MASTER_PORT": "20042"})
        for part in command
    ]
    shell = expanded[expanded.index("-c") + 1]
    assert shell == 'PET_NODE_RANK="$SLURM_PROCID" exec "$@"'
    torchrun = expanded[expanded.index("-c") + 3 :]
    assert torchrun[0] == "torchrun"
    from torch.distributed.run import get_args_parser

    args = get_args_parser().parse_args(torchrun[1:])
    assert (args.nnodes, args.nproc_per_node, args.rdzv_backend) == ("4", "8", "static")
    assert (args.master_addr, args.master_port, args.max_restarts) == ("node1", 20042, 0)
    assert not args.standalone and args.training_script == "train.py"


def test_the_shell_gives_each_task_its_own_node_rank(tmp_path: Path) -> None:
    """What srun starts on each node: bash exports PET_NODE_RANK from that task's SLURM_PROCID."""
    job = job_with(("python", "train.py"), Launcher("torchrun", nproc_per_node=1, nnodes=2))
    command = [
        expand_variables(p, {"REPROBOX_MASTER_ADDR": "a", "REPROBOX_MASTER_PORT": "1"})
        for p in launch_command(job)
    ]
    start = command.index("bash")
    probe = [sys.executable, "-c", "import os, sys; print(os.environ['PET_NODE_RANK'], sys.argv[1:])"]
    shell = [*command[start : start + 3], "argv0", *probe, "x"]  # bash -c SCRIPT $0, then "$@"
    done = subprocess.run(
        shell, capture_output=True, text=True, env={"SLURM_PROCID": "1", "PATH": "/usr/bin:/bin"}, check=True
    )
    assert done.stdout.strip() == "1 ['x']"


def test_the_ddp_example_asks_for_two_ranks_under_torchrun() -> None:
    job = load_job(EXAMPLE)
    assert job.launcher == Launcher("torchrun", nproc_per_node=2, nnodes=1)
    assert launch_command(job)[:2] == ("torchrun", "--standalone")
