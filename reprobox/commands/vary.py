"""`verify --vary`: the variation matrix's arguments, output and exit code (the library does the runs)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from reprobox import runner, runtimes
from reprobox.commands.common import (
    check_attestation_target,
    check_output_file,
    check_runs_dir,
    load_job_with_flags,
    runtime_options,
)
from reprobox.errors import EXIT_JOB_FAILED, EXIT_NOT_REPRODUCIBLE, EXIT_OK, UsageError

if TYPE_CHECKING:
    from reprobox.commands.output import Output

LIST = "list"


def help_text() -> str:
    """The --vary help: every factor with its pair of values (the registry is the one source)."""
    from reprobox.forensics.variation import factor_table

    names = "; ".join(f"{f['name']} ({f['values']})" for f in factor_table())
    return (
        "vary one factor at a time against a baseline run twice, and say which ones change the result: "
        f"a comma-separated list, `all`, or `list` to describe them. Factors: {names}"
    )


def require_job(args: argparse.Namespace) -> None:
    """verify's JOB is optional on the command line only so that `--vary list` can go without it."""
    if args.job is None:
        raise UsageError(
            "verify needs a job: reprobox verify JOB, where JOB is a job.yaml file or a folder holding one "
            "(only `reprobox verify --vary list` runs without one)"
        )


def vary_command(args: argparse.Namespace, out: Output) -> int:
    from reprobox.forensics import variation
    from reprobox.render import variation as render

    reports = [(path, flag) for path, flag in ((args.html, "--html"), (args.markdown, "--markdown")) if path]
    if args.vary.strip() == LIST:
        if reports:
            raise UsageError(f"{reports[0][1]} writes the matrix of a run; `--vary list` runs nothing")
        out.result({"factors": variation.factor_table()}, render.factors_text())
        return EXIT_OK
    require_job(args)
    if args.stop_on_divergence or args.keep_going or args.runs != 2:
        raise UsageError(
            "--vary runs a baseline twice and each factor once; it does not take --runs, --keep-going or "
            "--stop-on-divergence",
            hint="leave them out",
        )
    factors = variation.parse_factors(args.vary)
    spec = load_job_with_flags(args)
    check_runs_dir(args.runs_dir)
    check_attestation_target(args, spec.job_file)
    for path, flag in reports:
        check_output_file(path, flag)  # before any run: a bad path costs nothing
    runtime = runtimes.open_runtime(args.runtime, runtime_options(args, spec))
    options = runner.RunOptions(runs_dir=args.runs_dir, echo=out.job_output(), max_steps=args.max_steps)
    result = variation.vary(spec, runtime, options, variation.VaryOptions(factors, parallel=args.parallel))
    data = result.to_json()
    if variation.attestable(result) and args.max_steps is None and not args.no_attestation:
        from reprobox import attest

        target = args.attestation or attest.attestation_path_for(spec.job_file)
        attest.write_attestation(target, variation.variation_statement(result), key=args.sign)
        data["attestation"] = str(target)
        out.progress(
            f"wrote {target} (the baseline's runs and the matrix); a reviewer runs: "
            f"reprobox reproduce {target}"
        )
    if reports:
        from reprobox.render.report_files import write_variation_report

        written = write_variation_report(result, spec.name, html_path=args.html, markdown_path=args.markdown)
        data["reports"] = [str(path) for path in written]
        out.progress(f"wrote {', '.join(data['reports'])} (the matrix as a table)")
    out.result(data, render.matrix_text(result))
    if result.sensitive:
        return EXIT_NOT_REPRODUCIBLE
    if result.failed:
        return EXIT_JOB_FAILED
    return EXIT_OK
