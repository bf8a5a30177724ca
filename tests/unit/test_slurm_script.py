"""RunPlan -> sbatch script and node plan, and Slurm's answers -> RunOutcome, without a cluster."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reprobox.guest.determinism import Determinism
from reprobox.jobfile import DataMount, JobSpec, Launcher, Resources
from reprobox.runtimes.base import RunOutcome, RunPlan
from reprobox.runtimes.slurm import (
    SlurmOptions,
    apply_final_state,
    batch_options,
    cpus_per_task,
    job_name,
    node_plan,
    parse_sacct_job,
    parse_scontrol_job,
    parse_scontrol_nodes,
    parse_squeue_line,
    placement_options,
    plan_from_node_plan,
    render_batch_script,
    state_dir,
    time_limit_minutes,
)
from reprobox.runtimes.slurm._scheduler import refusal

OPTIONS = SlurmOptions(container="none", python="/opt/venv/bin/python3")

SCONTROL_FAILED = (
    "JobId=41 JobName=reprobox-tiny-r1 UserId=ana(1000) GroupId=ana(1000) MCS_label=N/A Priority=1 "
    "JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 "
    "ExitCode=3:0 RunTime=00:00:02 TimeLimit=00:11:00 SubmitTime=2026-01-01T00:00:00 "
    "StartTime=2026-01-01T00:00:01 EndTime=2026-01-01T00:00:03 Partition=debug NodeList=node7 "
    "BatchHost=node7 NumNodes=1 NumCPUs=2 Command=/runs/tiny/r1/.reprobox/slurm/job.sbatch "
    "StdOut=/runs/tiny/r1/.reprobox/slurm/slurm-41.out Power=\n"
)


def make_plan(tmp_path: Path, *, timeout: float | None = 60.0, **job_fields: Any) -> RunPlan:
    code = tmp_path / "my code"
    run_dir = tmp_path / "runs" / "tiny" / "r1"
    (run_dir / "outputs").mkdir(parents=True)
    code.mkdir(exist_ok=True)
    job = JobSpec(
        job_file=code / "job.yaml", name="tiny", command=("python", "train.py"), code=code, **job_fields
    )
    return RunPlan(
        job=job,
        run_id="20260101T000000Z-abcdef",
        run_dir=run_dir,
        guest_env={"REPROBOX_SEED": "7", "API_TOKEN": "s3cret"},
        command=job.command,
        timeout=timeout,
    )


def sbatch_lines(script: str) -> list[str]:
    """The options of the #SBATCH lines, unquoted the way sbatch reads them."""
    return [
        shlex.split(line.removeprefix("#SBATCH "))[0]
        for line in script.splitlines()
        if line.startswith("#SBATCH")
    ]


def test_script_asks_for_one_task_per_node_and_never_requeues(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    script = render_batch_script(plan, OPTIONS)
    assert script.startswith("#!/bin/bash\n")
    options = sbatch_lines(script)
    assert options == batch_options(plan)
    assert f"--job-name={job_name(plan)}" in options
    assert f"--output={state_dir(plan) / 'slurm-%j.out'}" in options
    assert f"--chdir={state_dir(plan)}" in options
    assert {"--nodes=1", "--ntasks-per-node=1", "--cpus-per-task=1", "--no-requeue", "--time=2"} <= set(
        options
    )
    last = script.strip().splitlines()[-1]
    assert shlex.split(last) == [
        "exec",
        "/opt/venv/bin/python3",
        "-m",
        "reprobox",
        "slurm-node",
        str(state_dir(plan) / "plan.json"),
    ]
    assert "REPROBOX_MASTER_ADDR" not in script  # a single node needs no rendezvous address


def test_script_is_valid_bash_even_with_spaces_in_paths(tmp_path: Path) -> None:
    plan = make_plan(tmp_path / "with space")
    script = render_batch_script(plan, OPTIONS)
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    assert f"--chdir={state_dir(plan)}" in sbatch_lines(script)


def test_job_name_is_unique_per_run_and_safe(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    assert job_name(plan) == "reprobox-tiny-20260101T000000Z-abcdef"


@pytest.mark.parametrize(("timeout", "minutes"), [(None, None), (1.0, 2), (60.0, 2), (61.0, 3), (600.0, 11)])
def test_slurm_time_limit_leaves_reprobox_the_exact_timeout(
    timeout: float | None, minutes: int | None
) -> None:
    assert time_limit_minutes(timeout) == minutes


def test_resources_become_slurm_requests(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, resources=Resources(memory="1536m", cpus=2.5, gpus=(0, 1)))
    options = batch_options(plan)
    assert {"--mem=1536M", "--cpus-per-task=3", "--gpus-per-node=2"} <= set(options)
    plan = make_plan(tmp_path / "no-timeout", timeout=None)
    assert not any(option.startswith(("--time", "--mem", "--gpus")) for option in batch_options(plan))


def test_cpus_cover_every_rank_and_its_pinned_threads(tmp_path: Path) -> None:
    here = tmp_path
    ddp = JobSpec(
        job_file=here / "job.yaml",
        name="d",
        command=("python", "t.py"),
        code=here,
        launcher=Launcher("torchrun", nproc_per_node=2),
        determinism=Determinism(threads=3),
    )
    assert cpus_per_task(ddp) == 6
    assert cpus_per_task(ddp.with_overrides(launcher=Launcher())) == 3
    assert cpus_per_task(ddp.with_overrides(determinism=Determinism())) == 2


def run_rendezvous(script: str, tmp_path: Path, job_id: int) -> dict[str, str]:
    """Run the script up to its node side, with an `scontrol` that lists three nodes; its exports."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    scontrol = fake_bin / "scontrol"
    scontrol.write_text('#!/bin/sh\n[ "$*" = "show hostnames n[1-3]" ] && printf "n1\\nn2\\nn3\\n"\n')
    scontrol.chmod(0o755)
    body = script.rsplit("\nexec ", 1)[0] + "\nenv\n"
    done = subprocess.run(
        ["bash", "-c", body],
        env={
            "SLURM_JOB_ID": str(job_id),
            "SLURM_JOB_NODELIST": "n[1-3]",
            "PATH": f"{fake_bin}:/usr/bin:/bin",
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def test_multi_node_script_rotates_node_ranks_by_job_id_and_puts_the_rendezvous_on_rank_0(
    tmp_path: Path,
) -> None:
    plan = make_plan(tmp_path, launcher=Launcher("torchrun", nproc_per_node=4, nnodes=3))
    script = render_batch_script(plan, OPTIONS)
    assert "--nodes=3" in sbatch_lines(script) and "--ntasks-per-node=1" in sbatch_lines(script)
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    orders = {}
    for job_id in (300, 301, 302, 123456):
        env = run_rendezvous(script, tmp_path, job_id)
        order = env["REPROBOX_NODE_ORDER"].split()
        orders[job_id] = order
        hostfile = Path(env["SLURM_HOSTFILE"])
        assert hostfile == tmp_path / f"nodes-{job_id}"
        assert hostfile.read_text().split() == order  # srun's task k runs on line k
        assert env["SLURM_DISTRIBUTION"] == "arbitrary"
        assert env["REPROBOX_MASTER_ADDR"] == order[0]
        assert env["REPROBOX_MASTER_PORT"] == str(20000 + job_id % 20000)  # one port per job
    assert orders[300] == ["n1", "n2", "n3"]
    assert orders[301] == ["n2", "n3", "n1"]
    assert orders[302] == ["n3", "n1", "n2"]
    assert orders[123456] == orders[300]
    shared = make_plan(tmp_path / "4", launcher=Launcher("torchrun", nproc_per_node=1, nnodes=4))
    env = run_rendezvous(render_batch_script(shared, OPTIONS), tmp_path, 7)  # 4 node ranks, 3 nodes
    assert "SLURM_HOSTFILE" not in env and "REPROBOX_NODE_ORDER" not in env  # Slurm's own layout then
    assert env["REPROBOX_MASTER_ADDR"] == "n1"


def test_a_single_node_script_needs_no_rendezvous_or_host_file(tmp_path: Path) -> None:
    script = render_batch_script(
        make_plan(tmp_path, launcher=Launcher("torchrun", nproc_per_node=2)), OPTIONS
    )
    assert "SLURM_HOSTFILE" not in script and "REPROBOX_MASTER_ADDR" not in script


@pytest.mark.parametrize(
    ("said", "words"),
    [
        (
            "allocation failure: Requested node configuration is not available\n",
            "Requested node configuration is not available",
        ),
        (
            "sbatch: error: invalid partition specified: gpu\n"
            "allocation failure: Invalid partition name specified",
            "Invalid partition name specified",
        ),
        (
            "sbatch: error: Batch job submission failed: "
            "Unable to contact slurm controller (connect failure)",
            "Unable to contact slurm controller (connect failure)",
        ),
        ("", ""),
    ],
)
def test_slurms_refusal_is_its_last_line_without_prefixes(said: str, words: str) -> None:
    assert refusal(said) == words


def test_placement_asks_for_what_every_run_will(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, launcher=Launcher("torchrun", nproc_per_node=2, nnodes=2))
    placement = placement_options(plan.job, plan.timeout)
    assert placement == ["--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=2", "--time=2"]
    assert set(placement) <= set(batch_options(plan))


def test_node_plan_round_trips_through_json(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    plan = make_plan(
        tmp_path,
        data=(DataMount(source=data, target="/data", env="DATA_DIR"),),
        network=True,
        resources=Resources(memory="1g", gpus=(1,), pids=99),
    )
    image = {"id": "sha256:" + "ab" * 32, "repo_digest": None}
    written = json.loads(json.dumps(node_plan(plan, SlurmOptions(container="docker"), image)))
    assert written["container"] == "docker" and written["image"] == image
    rebuilt = plan_from_node_plan(written)
    assert rebuilt.job.data == plan.job.data
    assert rebuilt.job.resources == plan.job.resources
    assert (rebuilt.job.code, rebuilt.job.network, rebuilt.job.name) == (plan.job.code, True, "tiny")
    assert (rebuilt.run_id, rebuilt.run_dir, rebuilt.command) == (plan.run_id, plan.run_dir, plan.command)
    assert rebuilt.guest_env == plan.guest_env
    assert rebuilt.timeout is None  # Slurm's --time and the controller enforce it


def test_node_plan_of_another_schema_is_refused(tmp_path: Path) -> None:
    from reprobox.errors import UsageError

    written = node_plan(make_plan(tmp_path), OPTIONS)
    with pytest.raises(UsageError, match="schema"):
        plan_from_node_plan({**written, "schema": "reprobox.slurm-node/99"})


def test_scontrol_line_is_parsed() -> None:
    state = parse_scontrol_job(SCONTROL_FAILED)
    assert state is not None
    assert (state.state, state.reason, state.nodes) == ("FAILED", "NonZeroExitCode", "node7")
    assert (state.exit_code, state.exit_signal) == (3, None)
    assert state.facts["BatchHost"] == "node7" and state.facts["Partition"] == "debug"
    assert not state.active
    assert parse_scontrol_job("") is None


def test_sacct_and_squeue_lines_are_parsed() -> None:
    cancelled = parse_sacct_job("CANCELLED by 1000|0:15|node3|None\n")
    assert cancelled is not None
    assert (cancelled.state, cancelled.exit_signal, cancelled.reason) == ("CANCELLED", 15, "")
    pending = parse_squeue_line("PENDING|Resources|\n")
    assert pending is not None and pending.active and pending.reason == "Resources"
    running = parse_squeue_line("RUNNING|None|node[1-2]")
    assert running is not None and running.nodes == "node[1-2]" and running.reason == ""
    assert parse_squeue_line("") is None


def final(line: str) -> Any:
    state = parse_scontrol_job(line)
    assert state is not None
    return state


def test_a_failed_job_keeps_the_node_exit_status_and_slurm_reason() -> None:
    outcome = RunOutcome()
    failure = apply_final_state(
        outcome, final(SCONTROL_FAILED), {"exit_code": 3, "signal": None}, stopped_by_us=False
    )
    assert outcome.exit_code == 3 and failure == "Slurm ended the job as FAILED (NonZeroExitCode)"


def test_without_a_node_record_the_exit_status_comes_from_slurm() -> None:
    outcome = RunOutcome()
    apply_final_state(outcome, final(SCONTROL_FAILED), None, stopped_by_us=False)
    assert outcome.exit_code == 3
    outcome = RunOutcome()
    apply_final_state(
        outcome, final(SCONTROL_FAILED.replace("ExitCode=3:0", "ExitCode=0:9")), None, stopped_by_us=False
    )
    assert (outcome.exit_code, outcome.signal) == (None, 9)


def test_a_completed_job_is_no_failure() -> None:
    outcome = RunOutcome()
    line = SCONTROL_FAILED.replace("JobState=FAILED Reason=NonZeroExitCode", "JobState=COMPLETED Reason=None")
    assert (
        apply_final_state(outcome, final(line), {"exit_code": 0, "signal": None}, stopped_by_us=False) is None
    )
    assert outcome.succeeded


@pytest.mark.parametrize(
    ("state", "field"),
    [("TIMEOUT", "timed_out"), ("OUT_OF_MEMORY", "oom_killed")],
)
def test_time_limit_and_oom_are_recorded_as_such(state: str, field: str) -> None:
    outcome = RunOutcome()
    line = SCONTROL_FAILED.replace("JobState=FAILED", f"JobState={state}")
    failure = apply_final_state(outcome, final(line), {"exit_code": None, "signal": 15}, stopped_by_us=False)
    assert getattr(outcome, field) and not outcome.succeeded
    assert failure is not None and state in failure


@pytest.mark.parametrize("state", ["PREEMPTED", "NODE_FAIL", "CANCELLED", "BOOT_FAIL", "DEADLINE"])
def test_jobs_ended_from_outside_fail_with_slurm_state(state: str) -> None:
    outcome = RunOutcome()
    line = SCONTROL_FAILED.replace("JobState=FAILED Reason=NonZeroExitCode", f"JobState={state} Reason=None")
    failure = apply_final_state(outcome, final(line), {"exit_code": 0, "signal": None}, stopped_by_us=False)
    assert outcome.exit_code is None and not outcome.succeeded
    assert failure is not None and failure.startswith(f"Slurm ended the job as {state} (")


def test_a_job_we_stopped_is_not_blamed_on_slurm() -> None:
    outcome = RunOutcome(cancelled=True)
    line = SCONTROL_FAILED.replace("JobState=FAILED", "JobState=CANCELLED")
    assert apply_final_state(outcome, final(line), None, stopped_by_us=True) is None
    assert (
        outcome.exit_code is None
        and outcome.failure_reason() == "stopped by reprobox once the verdict was known"
    )


def test_no_record_anywhere_is_a_failure() -> None:
    outcome = RunOutcome()
    failure = apply_final_state(outcome, None, None, stopped_by_us=False)
    assert failure is not None and "no record" in failure and not outcome.succeeded


def test_scontrol_node_lines_name_the_nodes_a_node_fail_lost() -> None:
    text = (
        "NodeName=n1 Arch=x86_64 CoresPerSocket=2  CPUAlloc=0 CPUTot=2 NodeAddr=10.0.0.1 State=IDLE "
        "Partitions=debug  BootTime=2026-01-01T00:00:00 CfgTRES=cpu=2 AllocTRES= CapWatts=n/a\n"
        "NodeName=n2 Arch=x86_64 CoresPerSocket=2  CPUAlloc=0 CPUTot=2 NodeAddr=10.0.0.2 "
        "State=DOWN+NOT_RESPONDING Partitions=debug CfgTRES=cpu=2 AllocTRES= "
        "Reason=Not responding [slurm@2026-01-01T00:00:09]\n"
        "NodeName=n3 State=IDLE+DRAIN Reason=disk swap [root@2026-01-01T00:00:01]\n"
    )
    n1, n2, n3 = parse_scontrol_nodes(text)
    assert (n1.name, n1.state, n1.reason, n1.lost) == ("n1", "IDLE", "", False)
    assert (n2.state, n2.reason, n2.lost) == ("DOWN+NOT_RESPONDING", "Not responding", True)
    assert n2.describe() == "n2 DOWN+NOT_RESPONDING (Not responding)"
    assert (n3.reason, n3.lost) == ("disk swap", False)  # drained, not lost: its jobs run on
    assert parse_scontrol_nodes("No nodes in the system\n") == []
