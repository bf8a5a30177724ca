"""`explain`: the first diverging operation of two existing runs, and the drill-down shared with verify."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox import compare, rerun, runner, runtimes
from reprobox.commands.common import (
    add_command,
    add_output_flags,
    add_replay_flags,
    check_report_targets,
    check_runs_dir,
    runtime_options,
)
from reprobox.errors import EXIT_JOB_FAILED, EXIT_NOT_REPRODUCIBLE, EXIT_OK
from reprobox.records.manifest import read_record
from reprobox.render import terminal

if TYPE_CHECKING:
    from reprobox.commands.output import Output
    from reprobox.forensics.drilldown import DrillDown

EXPLAIN_EPILOG = """\
examples:
  reprobox explain runs/mlp/20261124T101500Z-1a2b3c runs/mlp/20261124T102000Z-4d5e6f
  reprobox explain A B --json | jq .first_divergence.operation
  reprobox explain A B --html divergence.html          the aligned operations as a table

Two runs of one job that differ: reprobox replays the job twice to the first step where they differ
(every step when their trail was sparse or absent), records every operation of that step and the one
before (forward, backward, optimizer, data loading) with a digest of each tensor read and written,
aligns the two logs and names the first operation whose inputs are equal and whose outputs differ
(cause: operation), or the first value that entered from outside: the batch (data), a random draw
(rng), a parameter or a Python value (input). The job file and code must be those the runs ran.
Replays go to runs/<job>/.drill-down/. Two runs that already hold operation logs (replays) are
explained at once, without running anything.

exit: 0 the runs are identical, 1 they differ (explained or not), 3 a run failed
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    explain = add_command(
        commands,
        "explain",
        "find the first operation where two runs diverge: which op, module, source line and cause",
        EXPLAIN_EPILOG,
        description="Find the first operation where two runs of a job diverge, by replaying the job.",
    )
    explain.add_argument("run_a", metavar="RUN_A", help="a run directory or its manifest.json")
    explain.add_argument("run_b", metavar="RUN_B", help="another run of the same job")
    add_replay_flags(explain, runs="the runs", folder=".drill-down")
    explain.add_argument("--html", type=Path, metavar="FILE", help="also write the report as HTML")
    explain.add_argument("--markdown", type=Path, metavar="FILE", help="also write the report as Markdown")
    add_output_flags(explain)
    explain.set_defaults(handler=explain_command)


def explain_command(args: argparse.Namespace, out: Output) -> int:
    from reprobox.forensics import drilldown

    check_report_targets(args.html, args.markdown)
    records = [read_record(args.run_a), read_record(args.run_b)]
    comparison = compare.compare_runs(records)
    found: DrillDown | None = None
    if comparison.verdict == compare.DIFFERENT:
        operation, ranks = drilldown.analyze(records[0].run_dir, records[1].run_dir)
        if operation is not None:  # two replays: their logs say it all
            found = drilldown.DrillDown(
                operation["sentence"], step=operation["step"], operation=operation, ranks=ranks
            )
        else:
            check_runs_dir(args.runs_dir)
            job = rerun.job_of(records)
            runtime_name = args.runtime or records[0].runtime_name
            runtime = runtimes.open_runtime(runtime_name, runtime_options(args, job))
            options = runner.RunOptions(runs_dir=args.runs_dir)
            rerun.check_same_code(records[0], job, args.runs_dir)  # before the code is copied for the replays
            inputs = runner.prepare_inputs(job, options)
            out.early(verdict_line(comparison))  # known now: the replays only explain it
            found = drilldown.drill_down(job, runtime, options, comparison.first_divergence, inputs=inputs)
        attach(comparison, found)
    if args.html is not None or args.markdown is not None:
        from reprobox.render.report_files import write_report

        write_report(records, html_path=args.html, markdown_path=args.markdown, comparison=comparison)
    data = comparison.to_json()
    lines = [terminal.comparison_text(comparison)]
    if comparison.verdict == compare.IDENTICAL:
        lines.append("  nothing to explain: the runs are identical")
    out.result(data, "\n".join(lines))
    return {compare.IDENTICAL: EXIT_OK, compare.DIFFERENT: EXIT_NOT_REPRODUCIBLE}.get(
        comparison.verdict, EXIT_JOB_FAILED
    )


def verdict_line(comparison: compare.Comparison) -> str:
    """The verdict's first line, as the result prints it: said early when replays follow."""
    return terminal.comparison_text(comparison).split("\n", 1)[0]


def attach(comparison: compare.Comparison, found: DrillDown) -> None:
    """The drill-down goes into the comparison's first divergence (what --json and reports show)."""
    first: dict[str, Any] = comparison.first_divergence or {}
    if found.step is not None and "step" not in first:
        first["step"] = found.step
    if found.operation is not None:
        first["operation"] = found.operation
    first["drill_down"] = found.to_json()
    comparison.first_divergence = first
