"""Names both sides of the slurm runtime share: the options, the state directory and its files."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from reprobox.guest import settings
from reprobox.runtimes.base import RunPlan

CONTAINER_MODES = ("none", "docker")
CONTAINER_ENV = "REPROBOX_SLURM_CONTAINER"  # none (default) or docker
SBATCH_ARGS_ENV = "REPROBOX_SBATCH_ARGS"  # extra sbatch options, shell-quoted: "--partition=gpu --qos=x"
PYTHON_ENV = "REPROBOX_SLURM_PYTHON"  # the interpreter on the nodes (default: this one, a shared install)
STATE_SUBDIR = Path(settings.GUEST_STATE) / "slurm"
PLAN_FILE = "plan.json"
SCRIPT_FILE = "job.sbatch"
NODE_OUTCOME_FILE = "node-outcome.json"
NODE_PLAN_SCHEMA = "reprobox.slurm-node/1"
# A job over several nodes: its nodes by node rank (space-separated), and the host file srun follows.
NODE_ORDER_VARIABLE = "REPROBOX_NODE_ORDER"
NODE_ORDER_FILE_PREFIX = "nodes-"


@dataclass(frozen=True)
class SlurmOptions:
    """How runs are submitted: where the guest runs on the node, and what else sbatch is told."""

    container: str = "none"  # none: the local runtime in the node's environment; docker: the image
    python: str = sys.executable
    sbatch_args: tuple[str, ...] = ()


def state_dir(plan: RunPlan) -> Path:
    return plan.run_dir / STATE_SUBDIR
