"""`verify` and `compare`: the everyday commands that compare runs (`run` is `commands.run`, which loads
no comparison)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox import claims, compare, runner, runtimes, seeds, verify
from reprobox.commands import explain, vary
from reprobox.commands.common import (
    add_command,
    add_output_flags,
    add_run_flags,
    check_attestation_target,
    check_runs_dir,
    load_job_with_flags,
    runtime_options,
)
from reprobox.commands.run import run_options
from reprobox.errors import EXIT_JOB_FAILED, EXIT_NOT_REPRODUCIBLE, EXIT_OK, UsageError
from reprobox.records.manifest import read_record
from reprobox.render import terminal

if TYPE_CHECKING:
    from reprobox.commands.output import Output
    from reprobox.jobfile import JobSpec

VERIFY_EPILOG = """\
examples:
  reprobox verify examples/tiny-mlp/job.yaml              two runs, compared bit for bit
  reprobox verify job.yaml --runs 5 --keep-going          all five runs even after a difference
  reprobox verify job.yaml --json > verdict.json
  reprobox verify job.yaml --seeds 3           three seeds: each bit-reproducible, claims as mean ± std
  reprobox verify job.yaml --vary threads,tz   which of these factors changes the result
  reprobox verify job.yaml --vary all --parallel 2
  reprobox verify job.yaml --vary all --html vary.html   the matrix as a table too
  reprobox verify --vary list                  every factor and its pair of values (no job needed)
  reprobox verify job.yaml --resume-at 30      is resuming from the step-30 checkpoint exact?

Every run runs one snapshot of the code, taken before the first run (runs/<job>/.code/): the files
git would commit, or the folder minus .reproboxignore; edits during the runs change nothing.
On success it writes reprobox.attestation.json next to the job file (<name>.reprobox.attestation.json
for a job file <name>.yaml other than job.yaml): publish it with your code, and a reviewer runs
`reprobox reproduce reprobox.attestation.json`.

With --vary, the baseline (the job as `reprobox run` runs it) runs twice, then once per factor with
only that factor changed; the
matrix says per factor invariant, sensitive (files, tensors, max difference, first diverging step),
unsupported on the runtime, or failed. When the baseline's two runs are bit-identical they are
attested as above (whether or not a factor is sensitive), with the matrix in the attestation's
`variation` field; a baseline that differs from itself gets no attestation. --html FILE and
--markdown FILE write the matrix as a report (the verdict, one table row per factor with the
sensitive ones marked, the baseline's runs); their paths are checked before any run.

With --resume-at K (a job with a resume: section), three runs: stopped after step K (the job's
resume.stop), resumed from the checkpoint it saved there, and uninterrupted (beside the others with
--parallel 2); every checkpoint after step K and every file both write must be equal. A resume
that is not exact is explained by the state the checkpoint fails to restore (torch, CUDA, NumPy,
Python and DataLoader RNGs, optimizer, scheduler: digested at every trail step). No checkpoint at
step K: exit 2 listing the steps the job saved.

exit: 0 identical, 1 different, 3 a run failed (--vary: 0 every varied factor invariant, 1 one is
sensitive or the baseline differs from itself, 3 a run failed)
"""

COMPARE_EPILOG = """\
examples:
  reprobox compare runs/tiny-mlp/20261121T101500Z-1a2b3c runs/tiny-mlp/20261121T102000Z-4d5e6f
  reprobox compare a/manifest.json b/manifest.json --json

exit: 0 identical, 1 different, 3 one of the runs failed
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ver = add_command(
        commands,
        "verify",
        "run a job N times and check its checkpoints are bit-identical",
        VERIFY_EPILOG,
        description="Run a job N times and check that every run's checkpoints are bit-identical.",
    )
    add_run_flags(ver, job_help=" (not needed with --vary list)", job_optional=True)
    ver.add_argument(
        "--runs",
        type=int,
        default=2,
        metavar="N",
        help=f"number of runs, from 2 to {verify.MAX_RUNS} (default: 2)",
    )
    ver.add_argument("--keep-going", action="store_true", help="finish all runs even after a difference")
    ver.add_argument(
        "--stop-on-divergence",
        action="store_true",
        help="start all runs together, check each rerun's hash trail against the first run's at every "
        "recorded step, and stop as soon as one differs (implies --trail 1 unless --trail is given)",
    )
    ver.add_argument(
        "--attestation",
        type=Path,
        metavar="FILE",
        help="where to write the attestation on success (default: next to the job file)",
    )
    ver.add_argument("--no-attestation", action="store_true", help="do not write an attestation")
    ver.add_argument(
        "--no-drill-down",
        action="store_true",
        help="when runs differ, do not replay them to find the first diverging operation (by default, "
        "a job with a trail is replayed to that step with every operation recorded; see reprobox explain)",
    )
    ver.add_argument(
        "--resume-at",
        type=int,
        metavar="K",
        help="check that resuming is exact: run the job stopped after step K, resumed from its step-K "
        "checkpoint, and uninterrupted, and compare what both leave after K (needs a resume: section)",
    )
    ver.add_argument("--sign", type=Path, metavar="KEY", help="sign the attestation (ECDSA: the model too)")
    ver.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="K",
        help="run up to K runs side by side (on a cluster runtime, on different nodes; default: 1)",
    )
    ver.add_argument(
        "--seeds",
        type=int,
        metavar="N",
        help="verify with N seeds (the job's seed, +1, ...), each --runs times, and record every claim's "
        "mean and standard deviation over them (for papers that report mean ± std)",
    )
    ver.add_argument("--vary", metavar="FACTOR[,FACTOR...]", help=vary.help_text())
    ver.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="with --vary: write the matrix as a self-contained HTML page",
    )
    ver.add_argument(
        "--markdown", type=Path, metavar="FILE", help="with --vary: write the matrix as Markdown"
    )
    ver.set_defaults(handler=verify_command)

    cmp = add_command(
        commands,
        "compare",
        "compare two runs: which checkpoints and tensors differ, and by how much",
        COMPARE_EPILOG,
        description="Compare two runs: which checkpoints and tensors differ, and by how much.",
    )
    cmp.add_argument("run_a", metavar="RUN_A", help="a run directory or its manifest.json")
    cmp.add_argument("run_b", metavar="RUN_B", help="another run directory or manifest.json")
    add_output_flags(cmp)
    cmp.set_defaults(handler=compare_command)


def verify_command(args: argparse.Namespace, out: Output) -> int:
    if args.seeds is not None and args.vary is not None:
        raise UsageError("--seeds and --vary are separate checks; run one, then the other")
    if args.vary is not None:
        return vary.vary_command(args, out)
    if args.html is not None or args.markdown is not None:
        raise UsageError(
            "--html and --markdown write the matrix of --vary; a plain verify writes no report",
            hint="for its runs, run: reprobox report RUN_DIR... --html FILE",
        )
    vary.require_job(args)
    if args.resume_at is not None:
        return _verify_resume(args, out)
    settings = verify.VerifyOptions(
        runs=args.runs,
        keep_going=args.keep_going,
        stop_on_divergence=args.stop_on_divergence,
        parallel=args.parallel,
    )
    verify.check_counts(settings)
    spec = load_job_with_flags(args)
    check_runs_dir(args.runs_dir)
    check_attestation_target(args, spec.job_file)
    if args.seeds is not None:
        seeds.seed_list(spec.seed, args.seeds)  # a bad count is refused before anything runs
    runtime = runtimes.open_runtime(args.runtime, runtime_options(args, spec))
    if args.seeds is not None:
        return _verify_seeds(args, out, spec, runtime, settings)
    options = run_options(args, out)
    inputs = runner.prepare_inputs(spec, options)
    comparison, records = verify.verify(spec, runtime, options, settings, inputs=inputs)
    if comparison.verdict == compare.DIFFERENT and comparison.first_divergence and not args.no_drill_down:
        from reprobox.forensics import drilldown

        out.early(explain.verdict_line(comparison))  # known now: the replays that follow only explain it
        found = drilldown.drill_down(spec, runtime, options, comparison.first_divergence, inputs=inputs)
        explain.attach(comparison, found)
    data = comparison.to_json()
    judged = claims.judge_recorded(spec.claims, records[0].claims if records else [])
    data["claims"] = judged
    if comparison.verdict == compare.IDENTICAL and args.max_steps is None and not args.no_attestation:
        from reprobox import attest

        target = args.attestation or attest.attestation_path_for(spec.job_file)
        attest.write_attestation(
            target, attest.build_attestation(records), key=args.sign, checkpoints=records[0].output_dir
        )
        data["attestation"] = str(target)
        out.progress(f"wrote {target}; a reviewer runs: reprobox reproduce {target}")
    out.result(data, "\n".join([terminal.comparison_text(comparison), *terminal.claim_lines(judged)]))
    return exit_code(comparison.verdict)


def _verify_resume(args: argparse.Namespace, out: Output) -> int:
    from reprobox.resume import exact

    for flag, given in (
        ("--seeds", args.seeds is not None),
        ("--max-steps", args.max_steps is not None),
        ("--stop-on-divergence", args.stop_on_divergence),
        ("--keep-going", args.keep_going),
        ("--runs", args.runs != 2),  # the default
    ):
        if given:
            raise UsageError(f"--resume-at runs its own three runs; it does not take {flag}")
    spec = load_job_with_flags(args)
    exact.require_resume(spec)
    check_runs_dir(args.runs_dir)
    runtime = runtimes.open_runtime(args.runtime, runtime_options(args, spec))
    check = exact.verify_resume(spec, runtime, run_options(args, out), args.resume_at, parallel=args.parallel)
    data = check.comparison.to_json()
    data["resume"] = check.to_json()
    runs = f"  stopped run {check.stopped.run_dir} (its step-{args.resume_at} checkpoint resumed)"
    out.result(data, "\n".join([terminal.comparison_text(check.comparison), runs]))
    return exit_code(check.comparison.verdict)


def _verify_seeds(
    args: argparse.Namespace,
    out: Output,
    spec: JobSpec,
    runtime: runtimes.Runtime,
    settings: verify.VerifyOptions,
) -> int:
    result = seeds.verify_seeds(spec, runtime, run_options(args, out), settings, args.seeds)
    data = result.to_json()
    lines = [f"seed {seed}: {c.sentence}" for seed, c in zip(result.seeds, result.comparisons, strict=False)]
    lines += [f"  claim {name} = {spread.text()}" for name, spread in result.spread.items()]
    if not spec.claims:
        lines.append("  the job file claims no numbers: each seed was checked for bit-reproducibility only")
    if result.verdict == compare.IDENTICAL and args.max_steps is None and not args.no_attestation:
        from reprobox import attest

        target = args.attestation or attest.attestation_path_for(spec.job_file)
        statement = attest.build_attestation(result.records[0], extra={"seeds": result.attestation_entry()})
        outputs = result.records[0][0].output_dir
        attest.write_attestation(target, statement, key=args.sign, checkpoints=outputs)
        data["attestation"] = str(target)
        out.progress(f"wrote {target}; a reviewer runs: reprobox reproduce {target} --seeds {args.seeds}")
    out.result(data, "\n".join(lines))
    return exit_code(result.verdict)


def compare_command(args: argparse.Namespace, out: Output) -> int:
    records = [read_record(args.run_a), read_record(args.run_b)]
    comparison = compare.compare_runs(records)
    out.result(comparison.to_json(), terminal.comparison_text(comparison))
    return exit_code(comparison.verdict)


def exit_code(verdict: str) -> int:
    return {compare.IDENTICAL: EXIT_OK, compare.DIFFERENT: EXIT_NOT_REPRODUCIBLE}.get(
        verdict, EXIT_JOB_FAILED
    )
