"""The node side, started by the batch script: run the plan here, record how it ended for the controller.

`python -m reprobox slurm-node PLAN` runs the plan through the `local` runtime (the node's
prepared environment) or the `docker` runtime, and writes `node-outcome.json` beside the plan.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import Any

from reprobox.errors import EnvironmentProblem
from reprobox.fileio import write_text_atomic
from reprobox.runtimes.base import RunOutcome, RunPlan, Runtime, RuntimeOptions
from reprobox.runtimes.launcher import MASTER_ADDR_VARIABLE, MASTER_PORT_VARIABLE
from reprobox.runtimes.slurm._model import NODE_ORDER_VARIABLE, NODE_OUTCOME_FILE, STATE_SUBDIR
from reprobox.runtimes.slurm._script import plan_from_node_plan
from reprobox.timestamps import utc_now

# Slurm variables the job sees in any runtime mode (passed into containers), so records name the node.
NODE_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURMD_NODENAME", "SLURM_CLUSTER_NAME")
NODE_STOP_GRACE = 3.0  # a container's grace on scancel, well inside KillWait


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
    if os.environ.get(NODE_ORDER_VARIABLE):  # a job over several nodes: which node ran each node rank
        record["node_order"] = os.environ[NODE_ORDER_VARIABLE].split()
    try:
        outcome = _node_runtime(data, node_name).run(plan, _StdoutSink())
    except EnvironmentProblem as exc:
        sys.stdout.write(f"reprobox: on node {node_name}: {exc.message}\n")
        outcome = RunOutcome(started_at=utc_now(), ended_at=utc_now())
        record["error"] = exc.message
    record.update(asdict(outcome))
    write_text_atomic(
        plan.run_dir / STATE_SUBDIR / NODE_OUTCOME_FILE, json.dumps(record, indent=1, default=str)
    )
    if outcome.exit_code is not None:
        return outcome.exit_code
    return 128 + outcome.signal if outcome.signal else 1


def _node_runtime(data: Mapping[str, Any], node_name: str) -> Runtime:
    """The plan's runtime on this node, through the registry: local on the plan's interpreter, or docker
    with the plan's image (which must be on this node) and the node's name as the container's hostname."""
    from reprobox.runtimes import open_runtime

    if data["container"] != "docker":
        return open_runtime("local", RuntimeOptions(python=data["python"]))
    from reprobox.engine import connect

    engine = connect()
    image_id = str((data.get("image") or {}).get("id"))
    if not engine.image_exists(image_id):
        raise EnvironmentProblem(
            f"image {image_id[:19]} is not on node {node_name}; load it there (docker save | docker load)"
        )
    options = RuntimeOptions(image=image_id, engine=engine, hostname=node_name, stop_grace=NODE_STOP_GRACE)
    return open_runtime("docker", options)
