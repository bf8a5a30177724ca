"""A run plan as Slurm sees it: the sbatch options and script, and the plan the node side reads back.

Pure functions of the plan: unit-tested without a cluster.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from reprobox.errors import UsageError
from reprobox.jobfile import DataMount, JobSpec, Launcher, Resources
from reprobox.runtimes.base import RunPlan
from reprobox.runtimes.launcher import MASTER_ADDR_VARIABLE, MASTER_PORT_VARIABLE
from reprobox.runtimes.slurm._model import (
    NODE_ORDER_FILE_PREFIX,
    NODE_ORDER_VARIABLE,
    NODE_PLAN_SCHEMA,
    PLAN_FILE,
    SlurmOptions,
    state_dir,
)


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


def placement_options(job: JobSpec, timeout: float | None) -> list[str]:
    """What the scheduler must find for a run: nodes, a task per node, CPUs, memory, GPUs and time."""
    options = [
        f"--nodes={job.launcher.nnodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={cpus_per_task(job)}",
    ]
    minutes = time_limit_minutes(timeout)
    if minutes is not None:
        options.append(f"--time={minutes}")
    if job.resources.memory is not None:
        from reprobox.runtimes.docker import size_bytes

        options.append(f"--mem={math.ceil(size_bytes(job.resources.memory) / 2**20)}M")
    if isinstance(job.resources.gpus, tuple) and job.resources.gpus:
        options.append(f"--gpus-per-node={len(job.resources.gpus)}")
    return options


def batch_options(plan: RunPlan) -> list[str]:
    """The sbatch options for a run (also written as #SBATCH lines); extra arguments come after them."""
    return [
        f"--job-name={job_name(plan)}",
        f"--output={state_dir(plan) / 'slurm-%j.out'}",
        f"--chdir={state_dir(plan)}",
        *placement_options(plan.job, plan.timeout),
        "--no-requeue",  # a requeued job would start again in the same run directory: fail instead
    ]


def render_batch_script(plan: RunPlan, options: SlurmOptions) -> str:
    """The batch script for one run: sbatch options, the rendezvous for multi-node jobs, the node side."""
    lines = [
        "#!/bin/bash",
        f"# reprobox run {plan.run_id} of job {plan.job.name}; the node side reads {PLAN_FILE} beside this.",
        *(f"#SBATCH {shlex.quote(option)}" for option in batch_options(plan)),
        "set -eu",
    ]
    nnodes = plan.job.launcher.nnodes
    if plan.job.launcher.type == "torchrun" and nnodes > 1:
        hostfile = f"$PWD/{NODE_ORDER_FILE_PREFIX}$SLURM_JOB_ID"
        lines += [
            "# torchrun's static rendezvous: on node rank 0, at a port of this job's own. With a node per",
            "# node rank, node ranks follow the allocation rotated by the job id, so reruns place them on",
            "# the nodes in different orders: srun's task k (node rank k) runs on line k of the host file.",
            'nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))',
            f'{MASTER_ADDR_VARIABLE}="${{nodes[0]}}"',
            f"if [ ${{#nodes[@]}} -eq {nnodes} ]; then",
            "    turn=$((SLURM_JOB_ID % ${#nodes[@]}))",
            '    order=("${nodes[@]:turn}" "${nodes[@]:0:turn}")',
            f'    printf "%s\\n" "${{order[@]}}" >"{hostfile}"',
            f'    export SLURM_HOSTFILE="{hostfile}" SLURM_DISTRIBUTION=arbitrary',
            f'    export {NODE_ORDER_VARIABLE}="${{order[*]}}"',
            f'    {MASTER_ADDR_VARIABLE}="${{order[0]}}"',
            "fi",
            f'{MASTER_PORT_VARIABLE}="$((20000 + SLURM_JOB_ID % 20000))"',
            f"export {MASTER_ADDR_VARIABLE} {MASTER_PORT_VARIABLE}",
        ]
    node_side = [options.python, "-m", "reprobox", "slurm-node", str(state_dir(plan) / PLAN_FILE)]
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
            "launcher": asdict(job.launcher),  # a job over several nodes gets shared stable paths
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
        launcher=Launcher(**spec.get("launcher", {})),
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
