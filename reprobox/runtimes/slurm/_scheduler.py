"""Talking to Slurm: sbatch, squeue, scontrol, sacct and scancel, each failure an EnvironmentProblem."""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.jobfile import JobSpec
from reprobox.runtimes.base import RunPlan
from reprobox.runtimes.slurm._model import SBATCH_ARGS_ENV, SlurmOptions
from reprobox.runtimes.slurm._script import placement_options
from reprobox.runtimes.slurm._states import (
    JobState,
    NodeStatus,
    parse_sacct_job,
    parse_scontrol_job,
    parse_scontrol_nodes,
    parse_squeue_line,
)

CANCEL_WAIT_SECONDS = 90.0
COMMAND_TIMEOUT = 60.0


def _slurm(arguments: Sequence[str], *, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(arguments),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(
            f"`{shlex.join(arguments)}` did not answer ({exc}); check that Slurm's controller is up (sinfo)"
        ) from exc


def sbatch_version() -> str:
    """Slurm's version, from `sbatch --version`; an EnvironmentProblem when there is no Slurm here."""
    if shutil.which("sbatch") is None:
        raise EnvironmentProblem(
            "no Slurm here: `sbatch` is not on PATH; run reprobox on a cluster's login node, "
            "or install Slurm on this machine (a single node will do: apt-get install slurm-wlm)"
        )
    done = _slurm(["sbatch", "--version"])
    return done.stdout.strip()


def check_placeable(job: JobSpec, options: SlurmOptions) -> None:
    """Ask Slurm, before anything runs, whether it could ever place a run of the job (`sbatch --test-only`).

    A request no partition can meet (more nodes than exist) would otherwise wait in the queue forever.
    """
    requested = placement_options(job, job.timeout)
    done = _slurm(
        ["sbatch", "--test-only", *requested, *options.sbatch_args, "--output=/dev/null", "--wrap=true"]
    )
    if done.returncode == 0:
        return
    said = refusal(done.stderr or done.stdout) or f"exit status {done.returncode}"
    if any(sign in said for sign in _UNREACHABLE):
        raise EnvironmentProblem(f"Slurm's controller does not answer ({said}); check it is up (sinfo)")
    raise UsageError(
        f"{job.job_file}: Slurm cannot place a run of this job here ({' '.join(requested)}: {said}); "
        "lower launcher.nnodes or resources to what a partition has (sinfo -N), or name one that has them "
        f"with --sbatch-args or {SBATCH_ARGS_ENV}"
    )


_UNREACHABLE = ("Unable to contact slurm controller", "connect failure", "Connection refused")


def refusal(text: str) -> str:
    """Slurm's own words for a refusal: its last line, without the `sbatch: error:` prefixes."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1]
    for prefix in ("sbatch: error:", "allocation failure:", "Batch job submission failed:"):
        last = last.removeprefix(prefix).strip()
    return last


def submit(script: Path, plan: RunPlan, options: SlurmOptions) -> str:
    """sbatch the script; returns the job id. Raises EnvironmentProblem with sbatch's own words."""
    done = _slurm(["sbatch", "--parsable", *options.sbatch_args, str(script)])
    job_id = done.stdout.strip().split(";")[0]
    if done.returncode != 0 or not job_id.isdigit():
        lines = (done.stderr or done.stdout).strip().splitlines()
        said = lines[-1] if lines else f"exit status {done.returncode}"
        raise EnvironmentProblem(
            f"sbatch refused run {plan.run_id}: {said}"
            "; check the partition and limits (REPROBOX_SBATCH_ARGS, SBATCH_* variables)"
        )
    return job_id


def current_state(job_id: str) -> JobState | None:
    """The live state from squeue (every state, finished ones too while Slurm keeps them)."""
    done = _slurm(["squeue", "--states=all", "-h", "-j", job_id, "-o", "%T|%r|%N"])
    if done.returncode != 0 and "Invalid job id" in done.stderr:
        return None  # the job has left slurmctld's memory
    if done.returncode != 0:
        raise EnvironmentProblem(f"squeue could not report job {job_id}: {done.stderr.strip()}")
    return parse_squeue_line(done.stdout)


def lost_nodes(node_list: str) -> list[NodeStatus]:
    """Which of a job's nodes Slurm holds as down or not answering (after a NODE_FAIL); [] when unknown."""
    if not node_list:
        return []
    try:
        done = _slurm(["scontrol", "show", "node", "-o", node_list])
    except EnvironmentProblem:
        return []
    return [node for node in parse_scontrol_nodes(done.stdout) if node.lost] if done.returncode == 0 else []


def final_state(job_id: str) -> JobState | None:
    """Slurm's final word: scontrol while slurmctld keeps the job (MinJobAge), else the accounting DB."""
    done = _slurm(["scontrol", "show", "job", "-o", job_id])
    state = parse_scontrol_job(done.stdout) if done.returncode == 0 else None
    if state is None and shutil.which("sacct"):
        done = _slurm(["sacct", "-X", "-n", "-P", "-o", "State,ExitCode,NodeList,Reason", "-j", job_id])
        state = parse_sacct_job(done.stdout) if done.returncode == 0 else None
    if state is not None:
        state.facts.setdefault("JobId", job_id)
    return state


def cancel_and_wait(job_id: str, *, wait: float = CANCEL_WAIT_SECONDS) -> bool:
    """scancel the job and wait until Slurm lists it as neither pending nor running; True when gone.

    A second Ctrl-C does not stop the wait: a job left running would hold nodes and write into the run
    directory after reprobox recorded it.
    """
    deadline = time.monotonic() + wait
    escalated = False
    requested = False
    while time.monotonic() < deadline:
        try:
            if not requested:
                requested = _slurm(["scancel", job_id]).returncode == 0 or current_state(job_id) is None
            state = current_state(job_id)
            if state is None or not state.active:
                return True
            if not escalated and time.monotonic() > deadline - wait / 2:
                _slurm(["scancel", "--signal=KILL", "--full", job_id])
                escalated = True
            time.sleep(0.25)
        except (KeyboardInterrupt, EnvironmentProblem):  # slurmctld busy, or a second Ctrl-C: keep going
            time.sleep(0.25)
    return False


def cancel_by_name(name: str) -> None:
    """Cancel a job known only by its name (Ctrl-C arrived while sbatch was submitting it)."""
    with contextlib.suppress(EnvironmentProblem):
        done = _slurm(["squeue", "-h", "--name", name, "-o", "%i"])
        for job_id in done.stdout.split():
            cancel_and_wait(job_id)
