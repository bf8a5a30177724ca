"""The controller side: submit each run with sbatch, stream its output, watch it, and record its end."""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from reprobox import progress, signals
from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.fileio import write_text_atomic
from reprobox.jobfile import ImageSpec, redact_env
from reprobox.runtimes.base import OutputSink, RunOutcome, RunPlan, Runtime, RuntimeOptions
from reprobox.runtimes.slurm._model import (
    CONTAINER_ENV,
    CONTAINER_MODES,
    NODE_OUTCOME_FILE,
    PLAN_FILE,
    PYTHON_ENV,
    SBATCH_ARGS_ENV,
    SCRIPT_FILE,
    SlurmOptions,
    state_dir,
)
from reprobox.runtimes.slurm._scheduler import (
    cancel_and_wait,
    cancel_by_name,
    check_placeable,
    current_state,
    final_state,
    lost_nodes,
    sbatch_version,
    submit,
)
from reprobox.runtimes.slurm._script import job_name, node_plan, render_batch_script
from reprobox.runtimes.slurm._states import JobState, apply_final_state
from reprobox.timestamps import utc_now

POLL_SECONDS = 1.0
UNREACHABLE_LIMIT = 120.0  # how long slurmctld may not answer before reprobox cancels the job
TAIL_SECONDS = 0.2


class SlurmRuntime:
    """Runs each plan as one Slurm batch job; the guest runs on the allocated node(s)."""

    name = "slurm"
    variations: frozenset[str] = frozenset()  # the plan sent to the node carries no variation

    def __init__(
        self,
        options: SlurmOptions,
        *,
        image: Mapping[str, Any] | None = None,
        slurm_version: str = "",
    ) -> None:
        if options.container not in CONTAINER_MODES:
            raise UsageError(
                f"{options.container!r} is not a Slurm container mode; set {CONTAINER_ENV} to none or docker"
            )
        if options.container == "docker" and image is None:
            raise UsageError("the docker mode of the slurm runtime needs an image; open it with create()")
        self.options = options
        self.image = dict(image) if image is not None else None
        self.slurm_version = slurm_version

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

    def fingerprint(self) -> dict[str, Any]:
        raise UsageError(
            "the slurm runtime cannot fingerprint a node from here; run `srun reprobox fingerprint` to "
            "probe a node (every run's manifest records the fingerprint of the nodes it ran on)"
        )

    def run(self, plan: RunPlan, sink: OutputSink, stop: threading.Event | None = None) -> RunOutcome:
        plan.variation.check_supported(self.name, self.variations)
        outcome = RunOutcome(started_at=utc_now(), runtime=self.describe())
        folder = state_dir(plan)
        folder.mkdir(parents=True, exist_ok=True)
        # Owner-only (write_text_atomic's temp file is 0600): the plan carries the job's environment,
        # secrets included, until _record_end rewrites it redacted.
        write_text_atomic(folder / PLAN_FILE, json.dumps(node_plan(plan, self.options, self.image), indent=1))
        script = folder / SCRIPT_FILE
        write_text_atomic(script, render_batch_script(plan, self.options))
        slurm: dict[str, Any] = {"job_id": None, "state": "NOT_SUBMITTED", "reason": "", "nodes": ""}
        outcome.runtime["slurm"] = slurm
        job_id: str | None = None
        tail = _Tail(sink)
        try:
            try:
                with signals.held():  # a signal waits for the job id, so the job is cancelled below
                    job_id = submit(script, plan, self.options)
            except KeyboardInterrupt:
                if job_id is None:  # a second Ctrl-C cut sbatch short: it may have submitted the job
                    cancel_by_name(job_name(plan))
                raise
            slurm["job_id"] = job_id
            slurm["output"] = str(folder / f"slurm-{job_id}.out")
            tail.path = folder / f"slurm-{job_id}.out"
            progress.say(f"run {plan.run_id}: submitted as Slurm job {job_id}")
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
        outcome.ended_at = outcome.ended_at or utc_now()
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
                        progress.say(f"run {plan.run_id}: {exc.message}; retrying")
                    if now - unreachable_since > UNREACHABLE_LIMIT:
                        raise
                    continue
                unreachable_since = None
                if state is None:
                    return
                if (state.state, state.reason, state.nodes) != seen:
                    seen = (state.state, state.reason, state.nodes)
                    progress.say(_status_line(plan, job_id, state))
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
        write_text_atomic(state_dir(plan) / PLAN_FILE, json.dumps(recorded, indent=1))
        node = _read_json(state_dir(plan) / NODE_OUTCOME_FILE)
        failure = apply_final_state(outcome, final, node, stopped_by_us=stopped_by_us)
        slurm = outcome.runtime["slurm"]
        if final is not None:
            slurm.update(state=final.state, reason=final.reason, nodes=final.nodes, exit=final.exit_code)
            slurm.update({key.lower(): value for key, value in final.facts.items() if key != "JobId"})
        if final is not None and final.state == "NODE_FAIL":  # name the node, while Slurm still holds it down
            lost = lost_nodes(final.nodes)
            slurm["lost_nodes"] = [asdict(node) for node in lost]
            if lost and failure is not None:
                failure += ": " + ", ".join(node.describe() for node in lost)
        if failure is not None:
            slurm["failure"] = failure
        if node is not None:
            slurm["node"] = node.get("node")
            if node.get("node_order"):
                slurm["node_order"] = node["node_order"]  # node rank k ran on node_order[k]
            outcome.runtime["node_runtime"] = node.get("runtime") or {}
            if "paths" in outcome.runtime["node_runtime"]:  # what the job saw, where every runtime records it
                outcome.runtime["paths"] = outcome.runtime["node_runtime"]["paths"]
            outcome.started_at = node.get("started_at") or outcome.started_at
            outcome.ended_at = node.get("ended_at") or ""


def _status_line(plan: RunPlan, job_id: str, state: JobState) -> str:
    where = f" on {state.nodes}" if state.nodes and state.state != "PENDING" else ""
    why = f" ({state.reason})" if state.reason else ""
    return f"run {plan.run_id}: Slurm job {job_id} {state.state}{where}{why}"


def create(options: RuntimeOptions) -> Runtime:
    """Check Slurm answers and read the options; in docker mode build or reuse the job's image here.

    Options: `options.slurm_container`, else $REPROBOX_SLURM_CONTAINER (none or docker);
    `options.sbatch_args`, else $REPROBOX_SBATCH_ARGS (extra sbatch options; sbatch's own SBATCH_*
    variables work too); $REPROBOX_SLURM_PYTHON (the interpreter on the nodes).
    """
    container = options.slurm_container or os.environ.get(CONTAINER_ENV) or "none"
    raw_args, source = (
        (options.sbatch_args, "--sbatch-args")
        if options.sbatch_args
        else (os.environ.get(SBATCH_ARGS_ENV, ""), SBATCH_ARGS_ENV)
    )
    try:
        extra = tuple(shlex.split(raw_args))
    except ValueError as exc:
        raise UsageError(f"{source} cannot be split like shell arguments ({exc}); fix its quoting") from exc
    slurm = SlurmOptions(
        container=container, python=os.environ.get(PYTHON_ENV) or sys.executable, sbatch_args=extra
    )
    version = sbatch_version()  # after the options: a typo is refused even where Slurm does not answer
    if options.job is not None:
        check_placeable(options.job, slurm)  # before anything runs: never a run queued forever
    image: dict[str, Any] | None = None
    if container == "docker":
        job = options.job
        if job is not None and job.launcher.nnodes > 1:
            raise UsageError(
                f"{job.job_file}: launcher.nnodes is {job.launcher.nnodes}, but multi-node jobs run on Slurm "
                "only in the nodes' prepared environment; use --slurm-container none "
                f"(or unset {CONTAINER_ENV})"
            )
        image = _job_image(options)
    return SlurmRuntime(slurm, image=image, slurm_version=version)


def _job_image(options: RuntimeOptions) -> dict[str, Any]:
    """Build or reuse the job's image with this machine's engine (the nodes must be able to run it)."""
    from reprobox.engine import connect
    from reprobox.runtimes.docker import ensure_image, image_facts

    info = ensure_image(
        options.job.image if options.job is not None else ImageSpec(),
        engine=options.engine or connect(),
        base_image=options.base_image,
        wheelhouse=options.wheelhouse,
        lock=options.lock,
    )
    return image_facts(info)


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


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
