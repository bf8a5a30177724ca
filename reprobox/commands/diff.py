"""`diff`: did a change of the code change the numbers, and which line did it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox import compare, runner, runtimes
from reprobox.commands.common import (
    add_command,
    add_image_flags,
    add_output_flags,
    check_report_targets,
    check_runs_dir,
    runtime_options,
)
from reprobox.errors import EXIT_JOB_FAILED, EXIT_NOT_REPRODUCIBLE, EXIT_OK, UsageError

if TYPE_CHECKING:
    from reprobox.codediff import CodeDiff
    from reprobox.commands.output import Output

DIFF_EPILOG = """\
examples:
  reprobox diff HEAD~1                      the last commit against the working tree (uncommitted changes too)
  reprobox diff origin/main --max-steps 50  a pull request's check: the first 50 steps, main's side kept
  reprobox diff v1.2 v1.3 --job train/job.yaml --json | jq .first_divergence.operation
  reprobox diff HEAD~3 HEAD --html diff.html   the aligned operations around the first divergence

Runs the job once at each version of its code (REV_A, and REV_B or the working tree), with the same
job file, seed, data and stack, each with a hash trail at every step, and compares what they saved.
Every tensor and value equal is "numerically identical" (exit 0), however much the code differs.
Otherwise (exit 1) it names the first step whose trail differs, replays both versions to it with
every operation recorded, and names the first operation where one version computed a value the other
never did: its module, its source line in each version, and whether that line lies inside the change
(the hunk, and the commit that touched it). Also what differs that is not numerics: a checkpoint
only one version wrote, a saved value that changed.

A commit's code comes from git (your checkout is never touched). A run of a version at a commit is
kept under runs/<job>/.diff/ and reused by the next diff against it on the same job file and stack,
so CI on a pull request runs only the new side; cache that folder between CI jobs to keep it.

exit: 0 numerically identical, 1 the numbers differ, 2 bad input (an unknown revision, no git work
tree), 3 the job failed at a version, 4 environment problem
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    diff = add_command(
        commands,
        "diff",
        "run the job at two versions of its code: numerically identical, or the first diverging op and line",
        DIFF_EPILOG,
        description="Run the job at two versions of its code and say whether the numbers changed, and where.",
    )
    diff.add_argument(
        "rev_a", metavar="REV_A", help="the version to compare against: a commit, branch or tag"
    )
    diff.add_argument(
        "rev_b",
        metavar="REV_B",
        nargs="?",
        help="the other version (default: the working tree, as it is now)",
    )
    diff.add_argument(
        "--job",
        type=Path,
        default=Path("job.yaml"),
        metavar="FILE",
        help="the job file, used as it is now for both versions (default: ./job.yaml)",
    )
    diff.add_argument(
        "--max-steps",
        type=int,
        metavar="K",
        help="compare the first K optimizer steps only (by their trails): fast enough for every pull request",
    )
    diff.add_argument(
        "--runtime",
        choices=runtimes.names(),
        default=runtimes.AUTO,
        help="where to run: docker, local, podman, slurm, or auto (docker when an engine answers)",
    )
    diff.add_argument(
        "--runs-dir",
        type=Path,
        default=runner.runs_dir_default(),
        help="runs go under <job>/.diff/ there (default: ./runs, or $REPROBOX_RUNS_DIR)",
    )
    diff.add_argument("--seed", type=int, metavar="N", help="override the job's seed for both versions")
    diff.add_argument(
        "--no-reuse", action="store_true", help="run both versions, even one kept from an earlier diff"
    )
    diff.add_argument(
        "--no-drill-down", action="store_true", help="stop at the first differing step; replay nothing"
    )
    diff.add_argument("--html", type=Path, metavar="FILE", help="also write the report as HTML")
    diff.add_argument("--markdown", type=Path, metavar="FILE", help="also write the report as Markdown")
    add_image_flags(diff)
    add_output_flags(diff)
    diff.set_defaults(handler=diff_command)


def diff_command(args: argparse.Namespace, out: Output) -> int:
    from reprobox import codediff, jobfile
    from reprobox.render.codediff import code_diff_text

    check_report_targets(args.html, args.markdown)
    if args.max_steps is not None and args.max_steps < 1:
        raise UsageError("--max-steps must be a positive number of optimizer steps, e.g. --max-steps 50")
    job = jobfile.load_job(args.job)
    if args.seed is not None:
        if not 0 <= args.seed <= jobfile.MAX_SEED:
            raise UsageError(f"--seed must be from 0 to {jobfile.MAX_SEED}, not {args.seed}")
        job = job.with_overrides(seed=args.seed)
    check_runs_dir(args.runs_dir)
    runtime = runtimes.open_runtime(args.runtime, runtime_options(args, job))
    options = runner.RunOptions(runs_dir=args.runs_dir, echo=out.job_output(), max_steps=args.max_steps)
    settings = codediff.DiffOptions(
        rev_a=args.rev_a, rev_b=args.rev_b, drill_down=not args.no_drill_down, reuse=not args.no_reuse
    )
    found = codediff.diff_versions(job, runtime, options, settings)
    if (args.html is not None or args.markdown is not None) and len(found.records) == 2:
        from reprobox.render.report_files import write_report

        write_report(
            found.records, html_path=args.html, markdown_path=args.markdown, comparison=found.comparison
        )
    out.result(found.to_json(), code_diff_text(found))
    return exit_code(found)


def exit_code(found: CodeDiff) -> int:
    return {compare.IDENTICAL: EXIT_OK, compare.DIFFERENT: EXIT_NOT_REPRODUCIBLE}.get(
        found.verdict, EXIT_JOB_FAILED
    )
