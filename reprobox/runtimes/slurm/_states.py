"""Slurm's answers (scontrol, sacct, squeue) read into JobState, and a final state into the outcome."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reprobox.runtimes.base import RunOutcome

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


@dataclass(frozen=True)
class NodeStatus:
    """Slurm's account of one node: its name, state (IDLE, DOWN+NOT_RESPONDING, ...) and reason."""

    name: str
    state: str
    reason: str = ""

    @property
    def lost(self) -> bool:
        """Down, failed or not answering: what ends its jobs as NODE_FAIL."""
        flags = set(self.state.split("+"))
        return bool(flags & {"DOWN", "FAIL", "FAILING", "NOT_RESPONDING"})

    def describe(self) -> str:
        return f"{self.name} {self.state}" + (f" ({self.reason})" if self.reason else "")


def parse_scontrol_nodes(text: str) -> list[NodeStatus]:
    """`scontrol show node -o NODES` (a line of Key=Value per node) -> NodeStatus per node.

    Reason is free text (`Not responding [slurm@2026-01-01T00:00:00]`): the rest of the line after it,
    without who set it and when.
    """
    nodes = []
    for line in text.splitlines():
        name = re.search(r"(?:^|\s)NodeName=(\S+)", line)
        state = re.search(r"\sState=(\S+)", line)
        if name is None or state is None:
            continue
        reason = re.search(r"\sReason=(.*?)(?:\s+\[[^\]]*\])?\s*$", line)
        nodes.append(NodeStatus(name[1], state[1], _none_to_empty(reason[1]) if reason else ""))
    return nodes
