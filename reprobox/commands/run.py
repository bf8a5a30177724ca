"""`run`: one run of a job, recorded. Its own module, so that `reprobox run` loads nothing that compares
runs (the comparison, its evidence and NumPy are a tenth of a second of every run's start)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from reprobox import claims, runner, runtimes
from reprobox.commands.common import (
    add_command,
    add_run_flags,
    check_runs_dir,
    load_job_with_flags,
    runtime_options,
)
from reprobox.errors import EXIT_JOB_FAILED, EXIT_OK
from reprobox.render import terminal

if TYPE_CHECKING:
    from reprobox.commands.output import Output

RUN_EPILOG = """\
examples:
  reprobox run examples/tiny-mlp/job.yaml
  reprobox run job.yaml --runtime local --runs-dir /tmp/runs
  reprobox run job.yaml --json | jq -r .run_dir

The job's checkpoints go to $REPROBOX_OUTPUT_DIR; reprobox hashes them after the job exits and writes
runs/<job>/<run-id>/manifest.json with the hashes, the fingerprint and the exit status.
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = add_command(
        commands,
        "run",
        "run a job once and record its checkpoint hashes",
        RUN_EPILOG,
        description="Run a job once, deterministically, and record its checkpoints' hashes.",
    )
    add_run_flags(run)
    run.set_defaults(handler=run_command)


def run_options(args: argparse.Namespace, out: Output) -> runner.RunOptions:
    return runner.RunOptions(runs_dir=args.runs_dir, echo=out.job_output(), max_steps=args.max_steps)


def run_command(args: argparse.Namespace, out: Output) -> int:
    spec = load_job_with_flags(args)
    check_runs_dir(args.runs_dir)
    runtime = runtimes.open_runtime(args.runtime, runtime_options(args, spec))
    record = runner.execute(spec, runtime, run_options(args, out))
    judged = claims.judge_recorded(spec.claims, record.claims)
    data = {
        "status": record.status,
        "failure": record.failure,
        "run_dir": str(record.run_dir),
        "manifest": str(record.run_dir / "manifest.json"),
        "checkpoints": record.checkpoints,
        "claims": judged,
    }
    out.result(data, "\n".join([terminal.run_summary(record), *terminal.claim_lines(judged)]))
    return EXIT_OK if record.succeeded else EXIT_JOB_FAILED
