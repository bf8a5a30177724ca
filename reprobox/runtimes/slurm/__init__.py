"""The `slurm` runtime: each run is a Slurm batch job; the controller submits, watches and records it.

Why this shape:
- Slurm does the scheduling (`sbatch`), never reprobox: reruns go wherever the cluster puts them, side by
  side on different nodes with `verify --parallel K`.
- The node side is this same package (`python -m reprobox slurm-node PLAN`, in `_node`), which runs
  the plan through the `local` runtime (the node's prepared environment) or the `docker` runtime (the same
  hardened container settings, `container_settings`, the same run-dir ownership handling and `docker
  inspect` evidence) rather than a shell translation of them that could drift. It writes how the run ended
  to `node-outcome.json`; the controller adds Slurm's own account of the job (`scontrol`, else `sacct`).
- The run directory must be on a file system the nodes share with the controller (as it is on a
  cluster's home or project file system): the node writes the run's records there and the controller
  streams the job's output from the Slurm output file as it grows.
- A run Slurm could never place (more nodes or CPUs than any partition has) is refused before anything
  runs: `create` asks `sbatch --test-only` once, rather than leave runs pending forever.
- A job over several nodes takes its node ranks in the allocation rotated by the Slurm job id (srun
  follows a host file), so reruns place ranks on the nodes in different orders, and a rerun that agrees
  shows the result does not depend on placement; each run records which node ran each node rank.
- Stopping is Slurm's too: a stop request, Ctrl-C or the job's timeout become `scancel`, and the
  controller waits until Slurm no longer lists the job.

Under `docker` the container's hostname is the node's name (not the fixed `reprobox` of the docker
runtime), so the fingerprint's `hardware.hostname` names the node that ran each rank.

Modules: `_model` (options and the state directory), `_script` (the sbatch script and node plan, pure),
`_states` (Slurm's answers, pure), `_scheduler` (the Slurm commands), `_controller` (`SlurmRuntime`, and
`create`, the registry's entry) and `_node` (the node side, which opens its runtime through the registry).
"""

from __future__ import annotations

from reprobox.runtimes.slurm._controller import (
    create,
)
from reprobox.runtimes.slurm._model import (
    SlurmOptions,
    state_dir,
)
from reprobox.runtimes.slurm._script import (
    batch_options,
    cpus_per_task,
    job_name,
    node_plan,
    placement_options,
    plan_from_node_plan,
    render_batch_script,
    time_limit_minutes,
)
from reprobox.runtimes.slurm._states import (
    apply_final_state,
    parse_sacct_job,
    parse_scontrol_job,
    parse_scontrol_nodes,
    parse_squeue_line,
)

__all__ = [
    "SlurmOptions",
    "apply_final_state",
    "batch_options",
    "cpus_per_task",
    "create",
    "job_name",
    "node_plan",
    "parse_sacct_job",
    "parse_scontrol_job",
    "parse_scontrol_nodes",
    "parse_squeue_line",
    "placement_options",
    "plan_from_node_plan",
    "render_batch_script",
    "state_dir",
    "time_limit_minutes",
]
