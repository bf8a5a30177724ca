"""The `local` runtime: the guest entrypoint as a subprocess of this machine, in its own process group.

For machines without Docker and for fast tests. It gives the same determinism inside the job, and the
same absolute paths in every run (code, run dir, outputs, HOME, TMPDIR, data; see stable_paths): in a
private mount namespace where the kernel allows one, else in fixed folders that runs of a job take in
turn. Otherwise none of the container's isolation: the job sees the host's network and packages.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.guest import namespace, settings
from reprobox.guest.variation import find_libfaketime
from reprobox.runtimes.base import OutputSink, RunOutcome, RunPlan, Runtime, RuntimeOptions
from reprobox.runtimes.local._namespace import (
    forget_namespace_probe,
    guest_command,
    namespace_spec,
    namespace_works,
    scratch_folder,
)
from reprobox.runtimes.local._process import supervise
from reprobox.runtimes.local.fixed_paths import StagingStopped, ensure_root, staged_run
from reprobox.runtimes.local.tool_environment import job_search_path
from reprobox.runtimes.stable_paths import (
    BASE_DIR,
    MODE_FIXED,
    MODE_NAMESPACE,
    StableLayout,
    job_environment,
    layout_for,
    varied_layout,
)
from reprobox.timestamps import utc_now

ISOLATION_VARIABLE = "REPROBOX_LOCAL_ISOLATION"
ISOLATION_AUTO = "auto"  # a private mount namespace where the kernel allows one, else fixed folders
ISOLATIONS = (ISOLATION_AUTO, MODE_NAMESPACE, MODE_FIXED)
SHARED_STABLE_DIR = ".stable"  # under runs/<job>/: the stable root of jobs that span Slurm nodes


def create(options: RuntimeOptions) -> Runtime:
    """The local runtime on `options.python` (default: this interpreter)."""
    return LocalRuntime(python=options.python)


class LocalRuntime:
    name = "local"
    # hostname needs the private namespace (refused in fixed folders); clock_offset needs libfaketime;
    # file_order is applied by the guest's startup hook (Python-level listings).
    variations = frozenset({"hostname", "umask", "home", "path_root", "clock_offset", "file_order"})
    _probed: ClassVar[dict[str, bool]] = {}  # python -> whether a private mount namespace works
    _probe_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, python: str | None = None, isolation: str | None = None) -> None:
        self.python = python or sys.executable
        self.isolation = isolation or os.environ.get(ISOLATION_VARIABLE) or ISOLATION_AUTO
        if self.isolation not in ISOLATIONS:
            raise UsageError(
                f"{ISOLATION_VARIABLE}={self.isolation!r} is not one of {', '.join(ISOLATIONS)}; "
                "unset it or choose one of those"
            )

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "python": self.python, "host": os.uname().nodename}

    def fingerprint(self) -> dict[str, Any]:
        """Probe in a new interpreter (this runtime's), so the controller never imports torch itself."""
        from reprobox.guest.fingerprint import collect_in_new_process

        return collect_in_new_process(python=self.python)

    def layout(self, plan: RunPlan) -> StableLayout:
        """The job's stable paths: under /tmp, or for a job spread over nodes (srun starts its tasks
        outside any namespace of ours) on the shared file system that holds its runs."""
        return varied_layout(plan.job, os.getuid(), self._base(plan), plan.variation)

    @staticmethod
    def _base(plan: RunPlan) -> Path:
        return plan.run_dir.parent / SHARED_STABLE_DIR if _spans_nodes(plan) else BASE_DIR

    def environment(self, plan: RunPlan, layout: StableLayout | None = None) -> dict[str, str]:
        """The host environment (its PATH less reprobox's tool environment) plus the plan's settings,
        with every location at its stable path."""
        layout = layout or self.layout(plan)
        env = dict(os.environ)
        if "PATH" in env:  # the user's, never shadowed by reprobox's own tool environment
            env["PATH"] = job_search_path(env["PATH"])
        env.update(plan.guest_env)
        env.update(plan.variation.guest_env())
        env.update(plan.variation.file_order_roots(str(layout.code), map(str, layout.data.values())))
        env = job_environment(env, layout, plan.job)
        if plan.reference_run is not None:  # a host path: the host's files stay visible in the namespace
            env[settings.REFERENCE_TRAIL] = str(plan.reference_run / settings.TRAIL_FILE)
        return env

    def mode(self, layout: StableLayout, plan: RunPlan | None = None) -> str:
        """namespace or fixed: what this machine allows, probed once per interpreter, or what was asked.

        A job spread over nodes is always fixed: its other nodes' tasks cannot enter our namespace.
        """
        if self.isolation == MODE_FIXED or (plan is not None and _spans_nodes(plan)):
            return MODE_FIXED
        with self._probe_lock:
            if self.python not in self._probed:
                self._probed[self.python] = namespace_works(self.python, layout.root)
            works = self._probed[self.python]
        if works:
            return MODE_NAMESPACE
        if self.isolation == MODE_NAMESPACE:
            raise EnvironmentProblem(
                f"{ISOLATION_VARIABLE}=namespace, but this machine refuses a private mount namespace "
                f"to {self.python}; unset {ISOLATION_VARIABLE} to fall back to fixed folders"
            )
        return MODE_FIXED

    def run(self, plan: RunPlan, sink: OutputSink, stop: threading.Event | None = None) -> RunOutcome:
        plan.variation.check_supported(self.name, self.variations)
        outcome = RunOutcome(started_at=utc_now(), runtime=self.describe())
        layout = self.layout(plan)
        ensure_root(layout, os.getuid())
        mode = self.mode(layout, plan)
        _check_variation(plan, mode)
        if mode == MODE_NAMESPACE and plan.variation.path_root and not plan.variation.home:
            # Moving the paths must not move HOME with them (HOME is a factor of its own). In the
            # private namespace the unmoved HOME is a mount of this run's own; fixed folders would
            # share it with runs beside this one, so there it moves with the root.
            layout = replace(layout, home=layout_for(plan.job, os.getuid(), self._base(plan)).home)
        outcome.runtime["paths"] = layout.to_json(mode)
        plan.variation.record(outcome.runtime)
        env = self.environment(plan, layout)
        guest = [self.python, "-m", "reprobox.guest", "--", *plan.command]
        try:
            if mode == MODE_FIXED:
                with staged_run(layout, plan, lambda: stop is not None and stop.is_set()):
                    supervise(guest, layout.code, env, plan=plan, sink=sink, stop=stop, outcome=outcome)
            else:
                with scratch_folder(plan.job.name) as scratch, _mount_point(layout):
                    spec = scratch / "namespace.json"
                    spec.write_text(json.dumps(namespace_spec(layout, plan, scratch)), encoding="utf-8")
                    namespaced = guest_command(self.python, spec, plan.command)
                    supervise(namespaced, plan.run_dir, env, plan=plan, sink=sink, stop=stop, outcome=outcome)
                if outcome.exit_code == namespace.EXIT_SETUP_FAILED:  # refused after all: probe again
                    forget_namespace_probe(layout.root)
                    self._probed.pop(self.python, None)
        except StagingStopped:
            outcome.cancelled = True
        except KeyboardInterrupt:  # while waiting for the job's folder or moving the results home
            outcome.interrupted = True
        except OSError as exc:
            sink.write(f"reprobox: cannot prepare the stable paths under {layout.root}: {exc}\n".encode())
        if outcome.timed_out or outcome.interrupted or outcome.cancelled:
            outcome.exit_code = None
        outcome.ended_at = utc_now()
        return outcome


def _check_variation(plan: RunPlan, mode: str) -> None:
    """Refuse, before the run, a variation this machine cannot apply (never run it unvaried)."""
    if plan.variation.hostname is not None and mode != MODE_NAMESPACE:
        raise EnvironmentProblem(
            "varying the hostname on the local runtime needs a private namespace, which this machine "
            "refuses (or REPROBOX_LOCAL_ISOLATION=fixed); use --runtime docker"
        )
    if plan.variation.clock_offset is not None and find_libfaketime() is None:
        raise EnvironmentProblem(
            "varying the clock on the local runtime needs libfaketime: `apt-get install faketime`, "
            f"or set {settings.LIBFAKETIME} to its libfaketime.so.1"
        )


@contextlib.contextmanager
def _mount_point(layout: StableLayout) -> Iterator[None]:
    """A HOME moved outside the layout needs a folder on the host to bind onto; removed after when made."""
    home = layout.home
    made = not home.is_relative_to(layout.root) and not (home.exists() or home.is_symlink())
    try:
        yield
    finally:
        if made:
            with contextlib.suppress(OSError):
                home.rmdir()


def _spans_nodes(plan: RunPlan) -> bool:
    return plan.job.launcher.nnodes > 1
