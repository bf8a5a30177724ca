"""`spot-check`: check a finished run by replaying a few of its segments from its own checkpoints."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from reprobox import rerun, runner, runtimes
from reprobox.commands.common import (
    add_command,
    add_output_flags,
    add_replay_flags,
    check_runs_dir,
    runtime_options,
)
from reprobox.errors import EXIT_JOB_FAILED, EXIT_NOT_REPRODUCIBLE, EXIT_OK, UsageError
from reprobox.records.manifest import read_record
from reprobox.records.spotcheck import write_spot_check
from reprobox.resume import spot
from reprobox.timestamps import utc_now

if TYPE_CHECKING:
    from reprobox.commands.output import Output

SPOT_CHECK_EPILOG = """\
examples:
  reprobox spot-check runs/long/20261124T101500Z-1a2b3c --segments 3
  reprobox spot-check runs/long/latest --segments all --parallel 2
  reprobox spot-check RUN --segments 3 --json | jq '.segments[] | {start, end, match}'

The run's resumable checkpoints (the job file's resume.checkpoint) cut it into segments: from the
start to the first checkpoint and from each checkpoint to the next (what the run wrote after its last
checkpoint ends no segment: verify checks that). Each drawn segment is replayed from the checkpoint
the run recorded at its start (its bytes checked against the run's record first: an altered
checkpoint is reported, never replayed), stopped after its last step through the job's resume.stop,
and its checkpoint must equal the one the run recorded there. The draw is seeded by the run's own
checkpoint hashes (or --seed), so whoever made the run cannot choose which segments get checked: a
single fabricated segment among n is caught with probability M/n by a check of M. Replays go to
runs/<job>/.spot-check/; the result is kept in the run's spot-check.json and shown by its report.
The job file and code must be those the run ran.

exit: 0 every replayed segment matches, 1 one differs or a checkpoint was altered, 2 the run has no
resumable checkpoints, 3 a replay failed
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        commands,
        "spot-check",
        "check a finished run by replaying M of its segments between resumable checkpoints",
        SPOT_CHECK_EPILOG,
        description="Check a finished run by replaying a few of its segments from its own checkpoints.",
    )
    parser.add_argument("run", metavar="RUN_DIR", help="a run directory or its manifest.json")
    parser.add_argument(
        "--segments",
        required=True,
        metavar="M|all",
        help="how many segments to replay (drawn at random, seeded by the run's checkpoint hashes), or all",
    )
    parser.add_argument(
        "--seed", type=int, metavar="S", help="draw the segments with this seed instead of the run's hashes"
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="K",
        help="replay up to K segments side by side (default: 1)",
    )
    add_replay_flags(parser, runs="the run", folder=".spot-check")
    add_output_flags(parser)
    parser.set_defaults(handler=spot_check_command)


def spot_check_command(args: argparse.Namespace, out: Output) -> int:
    count = spot.parse_count(args.segments)
    if args.parallel < 1:
        raise UsageError(f"--parallel must be at least 1, not {args.parallel}")
    record = read_record(args.run)
    if not record.succeeded:
        raise UsageError(f"{record.run_dir} {record.status}: only a finished run can be spot-checked")
    check, chosen = spot.plan_spot_check(record, count, args.seed)
    check_runs_dir(args.runs_dir)
    job = rerun.job_of_run(record)
    rerun.check_same_code(record, job, args.runs_dir)
    runtime_name = args.runtime or record.runtime_name
    runtime = runtimes.open_runtime(runtime_name, runtime_options(args, job))
    options = runner.RunOptions(runs_dir=args.runs_dir, echo=out.job_output())
    inputs = runner.prepare_inputs(job, options)
    check = spot.spot_check(
        record, job, runtime, options, chosen=chosen, check=check, parallel=args.parallel, inputs=inputs
    )
    data = check.to_json()
    data["record"] = str(write_spot_check(record.run_dir, data, runtime=runtime.name, checked_at=utc_now()))
    lines = [f"spot-check of {record.run_dir}: {check.sentence()}"]
    lines += [f"  {r.segment.text():>16}  {r.outcome:8} {r.sentence}" for r in check.results]
    out.result(data, "\n".join(lines))
    return {"identical": EXIT_OK, "different": EXIT_NOT_REPRODUCIBLE}.get(check.verdict, EXIT_JOB_FAILED)
