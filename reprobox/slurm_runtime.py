"""The `slurm` runtime: each run is a Slurm batch job; the controller submits, watches and records it.

Why this shape:
- Slurm does the scheduling (`sbatch`), never reprobox: reruns go wherever the cluster puts them, side by
  side on different nodes with `verify --parallel K`.
- The node side is this same module (`python -m reprobox.slurm_runtime node PLAN`), which runs the plan
  through the `local` runtime (the node's prepared environment) or the `docker` runtime (the same hardened
  container settings, `container_settings`, the same run-dir ownership handling and `docker inspect`
  evidence) rather than a shell translation of them that could drift. It writes how the run ended to
  `node-outcome.json`; the controller adds Slurm's own account of the job (`scontrol`, else `sacct`).
- The run directory must be on a file system the nodes share with the controller (as it is on a
  cluster's home or project file system): the node writes the run's records there and the controller
  streams the job's output from the Slurm output file as it grows.
- Stopping is Slurm's too: a stop request, Ctrl-C or the job's timeout become `scancel`, and the
  controller waits until Slurm no longer lists the job.

Under `docker` the container's hostname is the node's name (not the fixed `reprobox` of the docker
runtime), so the fingerprint's `hardware.hostname` names the node that ran each rank.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any

from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.guest import settings
from reprobox.job import DataMount, JobSpec, Resources, redact_env
from reprobox.launcher import MASTER_ADDR_VARIABLE, MASTER_PORT_VARIABLE
from reprobox.runtime import OutputSink, RunOutcome, RunPlan, Runtime

Progress = Callable[[str], None]

CONTAINER_MODES = ("none", "docker")
CONTAINER_ENV = "REPROBOX_SLURM_CONTAINER"  # none (default) or docker
SBATCH_ARGS_ENV = "REPROBOX_SBATCH_ARGS"  # extra sbatch options, shell-quoted: "--partition=gpu --qos=x"
PYTHON_ENV = "REPROBOX_SLURM_PYTHON"  # the interpreter on the nodes (default: this one, a shared install)
STATE_SUBDIR = Path(settings.GUEST_STATE) / "slurm"
PLAN_FILE = "plan.json"
SCRIPT_FILE = "job.sbatch"
NODE_OUTCOME_FILE = "node-outcome.json"
NODE_PLAN_SCHEMA = "reprobox.slurm-node/1"
# Slurm variables the job sees in any runtime mode (passed into containers), so records name the node.
NODE_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURMD_NODENAME", "SLURM_CLUSTER_NAME")
ACTIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING"}
    | {"STAGE_OUT", "STOPPED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
)
ENDED_BY_THE_JOB = frozenset({"COMPLETED", "FAILED"})  # other final states come from outside the job
# Said when Slurm gives no Reason for a final state (it often has none once a job has ended).
STATE_MEANINGS = {
    "PREEMPTED": "preempted by a job of higher priority",
    "NODE_FAIL": "a node of the job failed",
    "BOOT_FAIL": "a node of the job failed to boot",
    "CANCELLED": "cancelled outside reprobox, by scancel or an administrator",
    "DEADLINE": "reached its deadline",
    "TIMEOUT": "reached its Slurm time limit",
    "OUT_OF_MEMORY": "exceeded its memory",
    "FAILED": "exited with a non-zero status",
}
POLL_SECONDS = 1.0
UNREACHABLE_LIMIT = 120.0  # how long slurmctld may not answer before reprobox cancels the job
TAIL_SECONDS = 0.2
CANCEL_WAIT_SECONDS = 90.0
COMMAND_TIMEOUT = 60.0
NODE_STOP_GRACE = 3.0  # a container's grace on scancel, well inside KillWait


def _quiet(_line: str) -> None:
    """A progress callback that shows nothing."""


# -- pure translation -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlurmOptions:
    """How runs are submitted: where the guest runs on the node, and what else sbatch is told."""

    container: str = "none"  # none: the local runtime in the node's environment; docker: the image
    python: str = sys.executable
    sbatch_args: tuple[str, ...] = ()


def state_dir(plan: RunPlan) -> Path:
    return plan.run_dir / STATE_SUBDIR


def job_name(plan: RunPlan) -> str:
    """Unique per run, so a job submitted while Ctrl-C interrupted `sbatch` can still be found."""
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", f"reprobox-{plan.job.name}-{plan.run_id}")


def cpus_per_task(job: JobSpec) -> int:
    """CPUs for the node's one task: resources.cpus if set, else one per rank times its pinned threads."""
    if job.resources.cpus is not None:
        return max(1, math.ceil(job.resources.cpus))
    ranks = job.launcher.nproc_per_node if job.launcher.type == "torchrun" else 1
    return ranks * (job.determinism.threads or 1)


def time_limit_minutes(timeout: float | None) -> int | None:
    """Slurm's limit: the job's timeout rounded up, plus a minute so reprobox's own, exact one fires first."""
    return None if timeout is None else math.ceil(timeout / 60) + 1


def batch_options(plan: RunPlan) -> list[str]:
    """The sbatch options for a run (also written as #SBATCH lines); extra arguments come after them."""
    job = plan.job
    options = [
        f"--job-name={job_name(plan)}",
        f"--output={state_dir(plan) / 'slurm-%j.out'}",
        f"--chdir={state_dir(plan)}",
        f"--nodes={job.launcher.nnodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={cpus_per_task(job)}",
        "--no-requeue",  # a requeued job would start again in the same run directory: fail instead
    ]
    minutes = time_limit_minutes(plan.timeout)
    if minutes is not None:
        options.append(f"--time={minutes}")
    if job.resources.memory is not None:
        from reprobox.docker_runtime import size_bytes

        options.append(f"--mem={math.ceil(size_bytes(job.resources.memory) / 2**20)}M")
    if isinstance(job.resources.gpus, tuple) and job.resources.gpus:
        options.append(f"--gpus-per-node={len(job.resources.gpus)}")
    return options


def render_batch_script(plan: RunPlan, options: SlurmOptions) -> str:
    """The batch script for one run: sbatch options, the rendezvous for multi-node jobs, the node side."""
    lines = [
        "#!/bin/bash",
        f"# reprobox run {plan.run_id} of job {plan.job.name}; the node side reads {PLAN_FILE} beside this.",
        *(f"#SBATCH {shlex.quote(option)}" for option in batch_options(plan)),
        "set -eu",
    ]
    if plan.job.launcher.type == "torchrun" and plan.job.launcher.nnodes > 1:
        lines += [
            "# torchrun's static rendezvous: rank 0 on the first node, a port of this job's own",
            f'{MASTER_ADDR_VARIABLE}="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
            f'{MASTER_PORT_VARIABLE}="$((20000 + SLURM_JOB_ID % 20000))"',
            f"export {MASTER_ADDR_VARIABLE} {MASTER_PORT_VARIABLE}",
        ]
    node_side = [options.python, "-m", "reprobox.slurm_runtime", "node", str(state_dir(plan) / PLAN_FILE)]
    lines.append("exec " + shlex.join(node_side))
    return "\n".join(lines) + "\n"


def node_plan(plan: RunPlan, options: SlurmOptions, image: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the node side needs to rebuild the plan and its runtime (plain JSON data)."""
    job = plan.job
    return {
        "schema": NODE_PLAN_SCHEMA,
        "container": options.container,
        "python": options.python,
        "image": dict(image) if image is not None else None,
        "job": {
            "job_file": str(job.job_file),
            "name": job.name,
            "command": list(job.command),
            "code": str(job.code),
            "data": [
                {"source": str(mount.source), "target": mount.target, "env": mount.env} for mount in job.data
            ],
            "network": job.network,
            "resources": asdict(job.resources),
        },
        "run_id": plan.run_id,
        "run_dir": str(plan.run_dir),
        "guest_env": dict(plan.guest_env),
        "command": list(plan.command),
        "reference_run": str(plan.reference_run) if plan.reference_run is not None else None,
    }


def plan_from_node_plan(data: Mapping[str, Any]) -> RunPlan:
    """Rebuild the RunPlan on the node; the job carries only what runtimes read (the rest is in guest_env)."""
    if data.get("schema") != NODE_PLAN_SCHEMA:
        raise UsageError(f"the node plan has schema {data.get('schema')!r}, not {NODE_PLAN_SCHEMA!r}")
    spec = data["job"]
    resources = dict(spec["resources"])
    if isinstance(resources.get("gpus"), list):
        resources["gpus"] = tuple(resources["gpus"])
    job = JobSpec(
        job_file=Path(spec["job_file"]),
        name=spec["name"],
        command=tuple(spec["command"]),
        code=Path(spec["code"]),
        data=tuple(DataMount(Path(d["source"]), d["target"], d["env"]) for d in spec["data"]),
        network=bool(spec["network"]),
        resources=Resources(**resources),
    )
    reference = data.get("reference_run")
    return RunPlan(
        job=job,
        run_id=data["run_id"],
        run_dir=Path(data["run_dir"]),
        guest_env=dict(data["guest_env"]),
        command=tuple(data["command"]),
        timeout=None,  # Slurm's --time and the controller enforce it
        reference_run=Path(reference) if reference else None,
    )


@dataclass(frozen=True)
class JobState:
    """Slurm's account of a job at one moment."""

    state: str  # PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, PREEMPTED, ... ("" when unknown)
    reason: str = ""
    nodes: str = ""
    exit_code: int | None = None
    exit_signal: int | None = None
    facts: dict[str, str] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


def parse_scontrol_job(text: str) -> JobState | None:
    """`scontrol show job -o ID` (one line of Key=Value) -> JobState; None when Slurm does not know it."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if "JobState=" not in line:
        return None
    facts = dict(re.findall(r"(?:^|\s)([A-Za-z][\w/:]*)=(\S*)", line))
    exit_code, exit_signal = _exit_pair(facts.get("ExitCode", ""))
    return JobState(
        state=facts.get("JobState", ""),
        reason=_none_to_empty(facts.get("Reason", "")),
        nodes=_none_to_empty(facts.get("NodeList", "")),
        exit_code=exit_code,
        exit_signal=exit_signal,
        facts={key: facts[key] for key in _KEPT_FACTS if key in facts},
    )


def parse_sacct_job(text: str) -> JobState | None:
    """`sacct -X -n -P -o State,ExitCode,NodeList,Reason -j ID` -> JobState ("CANCELLED by 0": CANCELLED)."""
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) >= 4 and parts[0]:
            exit_code, exit_signal = _exit_pair(parts[1])
            return JobState(
                state=parts[0].split()[0].rstrip("+"),
                reason=_none_to_empty(parts[3]),
                nodes=_none_to_empty(parts[2]),
                exit_code=exit_code,
                exit_signal=exit_signal,
            )
    return None


def parse_squeue_line(text: str) -> JobState | None:
    """`squeue -h -o %T|%r|%N` output -> JobState; None when the job is no longer listed."""
    line = text.strip()
    if not line:
        return None
    state, _, rest = line.partition("|")
    reason, _, nodes = rest.partition("|")
    return JobState(state=state, reason=_none_to_empty(reason), nodes=nodes)


_KEPT_FACTS = (
    "Partition",
    "BatchHost",
    "NumNodes",
    "NumCPUs",
    "SubmitTime",
    "StartTime",
    "EndTime",
    "RunTime",
)


def _exit_pair(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.partition(":")
    if not code.isdigit():
        return None, None
    return int(code), int(sig) if sig.isdigit() and int(sig) else None


def _none_to_empty(text: str) -> str:
    return "" if text in ("None", "(null)") else text


def apply_final_state(
    outcome: RunOutcome, final: JobState | None, node: Mapping[str, Any] | None, *, stopped_by_us: bool
) -> str | None:
    """Fill the outcome from Slurm's final state and the node's record; returns Slurm's failure, if any.

    The node's record says how the guest ended; Slurm's state says what happened around it (a time limit,
    the OOM killer, a preemption, a lost node) that the node may not have lived to record.
    """
    if node is not None:
        outcome.exit_code, outcome.signal = node.get("exit_code"), node.get("signal")
        outcome.oom_killed = outcome.oom_killed or bool(node.get("oom_killed"))
    elif final is not None and final.state in ENDED_BY_THE_JOB:
        outcome.exit_code, outcome.signal = (
            (final.exit_code, None) if final.exit_signal is None else (None, final.exit_signal)
        )
    if final is None:
        return None if node is not None else "Slurm has no record of the job (neither scontrol nor sacct)"
    outcome.timed_out = outcome.timed_out or final.state == "TIMEOUT"
    outcome.oom_killed = outcome.oom_killed or final.state == "OUT_OF_MEMORY"
    if stopped_by_us or outcome.timed_out or final.state not in ENDED_BY_THE_JOB:
        outcome.exit_code = None  # ended from outside the job: its exit status says nothing
    if stopped_by_us or (final.state == "COMPLETED" and outcome.exit_code == 0):
        return None
    why = final.reason or STATE_MEANINGS.get(final.state, "")
    return f"Slurm ended the job as {final.state}" + (f" ({why})" if why else "")


# -- talking to Slurm -------------------------------------------------------------------------------


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


class _Tail:
    """Streams a file that another host appends to (the Slurm output file) into the sink."""

    def __init__(self, sink: OutputSink) -> None:
        self.sink = sink
        self.path: Path | None = None
        self.offset = 0

    def pump(self) -> int:
        if self.path is None:
            return 0
        try:
            with self.path.open("rb") as stream:
                stream.seek(self.offset)
                chunk = stream.read()
        except FileNotFoundError:
            return 0
        if chunk:
            self.offset += len(chunk)
            self.sink.write(chunk)
        return len(chunk)

    def drain(self, quiet_for: float = 0.6, limit: float = 10.0) -> None:
        """Read until the file stops growing: a shared file system may show the last bytes late."""
        deadline, last_growth = time.monotonic() + limit, time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last_growth < quiet_for:
            if self.pump():
                last_growth = time.monotonic()
            time.sleep(0.1)


# -- the runtime ------------------------------------------------------------------------------------


class SlurmRuntime:
    """Runs each plan as one Slurm batch job; the guest runs on the allocated node(s)."""

    name = "slurm"

    def __init__(
        self,
        options: SlurmOptions,
        *,
        image: Mapping[str, Any] | None = None,
        progress: Progress = _quiet,
        slurm_version: str = "",
    ) -> None:
        if options.container not in CONTAINER_MODES:
            raise UsageError(
                f"{options.container!r} is not a Slurm container mode; set {CONTAINER_ENV} to none or docker"
            )
        if options.container == "docker" and image is None:
            raise UsageError("the docker mode of the slurm runtime needs an image; use SlurmRuntime.for_job")
        self.options = options
        self.image = dict(image) if image is not None else None
        self.progress = progress
        self.slurm_version = slurm_version

    @classmethod
    def for_job(cls, job: JobSpec, args: argparse.Namespace, progress: Progress = _quiet) -> SlurmRuntime:
        """Check Slurm answers and read the options; in docker mode build or reuse the job's image here.

        Options: --slurm-container / $REPROBOX_SLURM_CONTAINER (none or docker), $REPROBOX_SBATCH_ARGS
        (extra sbatch options; sbatch's own SBATCH_* variables work too), $REPROBOX_SLURM_PYTHON.
        """
        version = _slurm_version()
        container = getattr(args, "slurm_container", None) or os.environ.get(CONTAINER_ENV) or "none"
        raw_args = getattr(args, "sbatch_args", None) or os.environ.get(SBATCH_ARGS_ENV, "")
        try:
            extra = tuple(shlex.split(raw_args)) if isinstance(raw_args, str) else tuple(raw_args)
        except ValueError as exc:
            raise UsageError(
                f"{SBATCH_ARGS_ENV} cannot be split like shell arguments ({exc}); fix its quoting"
            ) from exc
        options = SlurmOptions(
            container=container, python=os.environ.get(PYTHON_ENV) or sys.executable, sbatch_args=extra
        )
        image: dict[str, Any] | None = None
        if container == "docker":
            if job.launcher.nnodes > 1:
                raise UsageError(
                    f"{job.job_file}: launcher.nnodes is {job.launcher.nnodes}, but multi-node jobs run on "
                    f"Slurm only in the nodes' prepared environment; unset {CONTAINER_ENV} or set it to none"
                )
            image = _job_image(job, args, progress)
        return cls(options, image=image, progress=progress, slurm_version=version)

    def describe(self) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "name": self.name,
            "controller": platform.node(),
            "slurm_version": self.slurm_version,
            "mode": self.options.container,
            "python": self.options.python,
            "sbatch_args": list(self.options.sbatch_args),
        }
        if self.image is not None:
            facts["image"] = self.image
        return facts

    def run(self, plan: RunPlan, sink: OutputSink, stop: threading.Event | None = None) -> RunOutcome:
        outcome = RunOutcome(started_at=_now(), runtime=self.describe())
        folder = state_dir(plan)
        folder.mkdir(parents=True, exist_ok=True)
        _write_atomically(folder / PLAN_FILE, json.dumps(node_plan(plan, self.options, self.image), indent=1))
        script = folder / SCRIPT_FILE
        _write_atomically(script, render_batch_script(plan, self.options))
        slurm: dict[str, Any] = {"job_id": None, "state": "NOT_SUBMITTED", "reason": "", "nodes": ""}
        outcome.runtime["slurm"] = slurm
        job_id: str | None = None
        tail = _Tail(sink)
        try:
            try:
                job_id = submit(script, plan, self.options)
            except KeyboardInterrupt:
                cancel_by_name(job_name(plan))
                raise
            slurm["job_id"] = job_id
            slurm["output"] = str(folder / f"slurm-{job_id}.out")
            tail.path = folder / f"slurm-{job_id}.out"
            self.progress(f"run {plan.run_id}: submitted as Slurm job {job_id}")
            self._watch(job_id, plan, tail, stop, outcome)
        except KeyboardInterrupt:
            outcome.interrupted = True
        except EnvironmentProblem as exc:
            sink.write(f"reprobox: {exc.message}\n".encode())
            slurm["reason"] = exc.message
            if job_id is not None:  # slurmctld stopped answering: the job must not run on unrecorded
                outcome.cancelled = True
        stopped_by_us = outcome.interrupted or outcome.cancelled or outcome.timed_out
        if job_id is not None:
            try:
                if stopped_by_us:
                    slurm["cancel_confirmed"] = cancel_and_wait(job_id)
                self._record_end(job_id, plan, tail, outcome, stopped_by_us=stopped_by_us)
            except KeyboardInterrupt:  # Ctrl-C while recording: the job must still not outlive the run
                outcome.interrupted = True
                slurm["cancel_confirmed"] = cancel_and_wait(job_id)
            except EnvironmentProblem as exc:
                slurm["record_error"] = exc.message
        outcome.ended_at = outcome.ended_at or _now()
        return outcome

    def _watch(
        self, job_id: str, plan: RunPlan, tail: _Tail, stop: threading.Event | None, outcome: RunOutcome
    ) -> None:
        """Stream output and report state changes until the job ends, the deadline passes or stop is set."""
        seen: tuple[str, str, str] | None = None
        running_since: float | None = None
        unreachable_since: float | None = None
        next_poll = 0.0
        while True:
            tail.pump()
            if stop is not None and stop.is_set():
                outcome.cancelled = True
                return
            now = time.monotonic()
            if plan.timeout is not None and running_since is not None and now - running_since > plan.timeout:
                outcome.timed_out = True
                return
            if now >= next_poll:
                next_poll = now + POLL_SECONDS
                try:
                    state = current_state(job_id)
                except EnvironmentProblem as exc:
                    if unreachable_since is None:
                        unreachable_since = now
                        self.progress(f"run {plan.run_id}: {exc.message}; retrying")
                    if now - unreachable_since > UNREACHABLE_LIMIT:
                        raise
                    continue
                unreachable_since = None
                if state is None:
                    return
                if (state.state, state.reason, state.nodes) != seen:
                    seen = (state.state, state.reason, state.nodes)
                    self.progress(_status_line(plan, job_id, state))
                if state.state == "RUNNING" and running_since is None:
                    running_since = now
                if not state.active:
                    return
            time.sleep(TAIL_SECONDS)

    def _record_end(
        self, job_id: str, plan: RunPlan, tail: _Tail, outcome: RunOutcome, *, stopped_by_us: bool
    ) -> None:
        """Slurm's final state, the node's record and the rest of the output, into the outcome."""
        final = final_state(job_id)
        for _attempt in range(20):  # slurmctld may still be completing the job
            if final is None or not final.active:
                break
            time.sleep(0.5)
            final = final_state(job_id)
        tail.drain()
        # The plan held the job's environment for the node; the record keeps it with secrets redacted.
        recorded = node_plan(plan, self.options, self.image)
        recorded["guest_env"] = redact_env(plan.guest_env)
        _write_atomically(state_dir(plan) / PLAN_FILE, json.dumps(recorded, indent=1))
        node = _read_json(state_dir(plan) / NODE_OUTCOME_FILE)
        failure = apply_final_state(outcome, final, node, stopped_by_us=stopped_by_us)
        slurm = outcome.runtime["slurm"]
        if final is not None:
            slurm.update(state=final.state, reason=final.reason, nodes=final.nodes, exit=final.exit_code)
            slurm.update({key.lower(): value for key, value in final.facts.items() if key != "JobId"})
        if failure is not None:
            slurm["failure"] = failure
        if node is not None:
            slurm["node"] = node.get("node")
            outcome.runtime["node_runtime"] = node.get("runtime") or {}
            outcome.started_at = node.get("started_at") or outcome.started_at
            outcome.ended_at = node.get("ended_at") or ""


def _status_line(plan: RunPlan, job_id: str, state: JobState) -> str:
    where = f" on {state.nodes}" if state.nodes and state.state != "PENDING" else ""
    why = f" ({state.reason})" if state.reason else ""
    return f"run {plan.run_id}: Slurm job {job_id} {state.state}{where}{why}"


def _slurm_version() -> str:
    if shutil.which("sbatch") is None:
        raise EnvironmentProblem(
            "no Slurm here: `sbatch` is not on PATH; run reprobox on a cluster's login node, "
            "or start a single-node test cluster with `sudo scripts/start-slurm.sh`"
        )
    done = _slurm(["sbatch", "--version"])
    return done.stdout.strip()


def _job_image(job: JobSpec, args: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    """Build or reuse the job's image with this machine's engine (the nodes must be able to run it)."""
    from reprobox.docker_runtime import ensure_image, image_facts
    from reprobox.engine import connect

    info = ensure_image(
        job.image,
        engine=connect(),
        progress=progress,
        base_image=getattr(args, "base_image", None),
        wheelhouse=getattr(args, "wheelhouse", None),
        lock=getattr(args, "lock", None),
    )
    return image_facts(info)


# -- the node side ----------------------------------------------------------------------------------


class _StdoutSink:
    """The job's output to this process's stdout: Slurm's output file, which the controller tails."""

    def write(self, chunk: bytes) -> None:
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()


def _terminate(_signum: int, _frame: FrameType | None) -> None:
    """scancel, a preemption or the time limit sends SIGTERM: stop the run like Ctrl-C, then record it."""
    raise KeyboardInterrupt


def run_on_node(plan_path: Path) -> int:
    """Run the plan on this node with the local or docker runtime; record how it ended for the controller."""
    data = json.loads(plan_path.read_text(encoding="utf-8"))
    plan = plan_from_node_plan(data)
    node_name = os.environ.get("SLURMD_NODENAME") or platform.node()
    slurm_env = {name: os.environ[name] for name in NODE_VARIABLES if name in os.environ}
    for name in (MASTER_ADDR_VARIABLE, MASTER_PORT_VARIABLE):
        if name in os.environ:
            slurm_env[name] = os.environ[name]
    plan = RunPlan(
        job=plan.job,
        run_id=plan.run_id,
        run_dir=plan.run_dir,
        guest_env={**plan.guest_env, **slurm_env},
        command=plan.command,
        timeout=None,
        reference_run=plan.reference_run,
    )
    signal.signal(signal.SIGTERM, _terminate)
    record: dict[str, Any] = {"node": node_name}
    try:
        outcome = _node_runtime(data, node_name).run(plan, _StdoutSink())
    except EnvironmentProblem as exc:
        sys.stdout.write(f"reprobox: on node {node_name}: {exc.message}\n")
        outcome = RunOutcome(started_at=_now(), ended_at=_now())
        record["error"] = exc.message
    record.update(asdict(outcome))
    _write_atomically(
        plan.run_dir / STATE_SUBDIR / NODE_OUTCOME_FILE, json.dumps(record, indent=1, default=str)
    )
    if outcome.exit_code is not None:
        return outcome.exit_code
    return 128 + outcome.signal if outcome.signal else 1


def _node_runtime(data: Mapping[str, Any], node_name: str) -> Runtime:
    if data["container"] == "docker":
        from reprobox.docker_runtime import DockerRuntime
        from reprobox.engine import connect

        class NodeDockerRuntime(DockerRuntime):
            """The docker runtime with the node's name as the container's hostname (see module docstring)."""

            def settings(self, plan: RunPlan) -> dict[str, Any]:
                created = super().settings(plan)
                created["hostname"] = node_name
                return created

        engine = connect()
        image_id = str((data.get("image") or {}).get("id"))
        if not engine.image_exists(image_id):
            raise EnvironmentProblem(
                f"image {image_id[:19]} is not on node {node_name}; load it there (docker save | docker load)"
            )
        return NodeDockerRuntime(engine.inspect_image(image_id), engine=engine, stop_grace=NODE_STOP_GRACE)
    from reprobox.local_runtime import LocalRuntime

    return LocalRuntime(python=data["python"])


# -- helpers ----------------------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_atomically(path: Path, text: str) -> None:
    """Owner-only: the plan carries the job's environment, secrets included, until the run ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
        stream.write(text)
    tmp.replace(path)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reprobox.slurm_runtime",
        description="The node side of reprobox's slurm runtime (started by the batch script it writes).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    node = commands.add_parser("node", help="run one planned run on this node")
    node.add_argument("plan", type=Path, help=f"the run's {PLAN_FILE}")
    args = parser.parse_args(argv)
    return run_on_node(args.plan)


if __name__ == "__main__":
    raise SystemExit(main())
