"""`cost`: what determinism costs a job, measured on the job itself (the library does the runs)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from reprobox import runner, runtimes
from reprobox.commands.common import (
    add_command,
    add_run_flags,
    check_runs_dir,
    load_job_with_flags,
    runtime_options,
)
from reprobox.errors import EXIT_NOT_REPRODUCIBLE, EXIT_OK, UsageError

if TYPE_CHECKING:
    from reprobox.commands.output import Output

DEFAULT_STEPS = 20

COST_EPILOG = """\
examples:
  reprobox cost job.yaml                         every setting that matters here, 20 steps, 2 runs each
  reprobox cost job.yaml --max-steps 50 --runtime local
  reprobox cost job.yaml --only tf32=true,threads=1
  reprobox cost job.yaml --json | jq '.recommended.block' -r

Each setting runs the job twice for its first --max-steps optimizer steps (one after another, never
side by side), with a hash trail on every step: the two runs' trails agreeing bit for bit make the
setting bit-exact. A step's time is the median over both runs' steps after the first, on a GPU with
the device synchronised, the trail's own hashing left out. Settings: the job's own (its job file's
determinism: section), then one knob changed at a time: on every machine the thread count,
fill_uninitialized_memory, oneDNN, deterministic algorithms, and everything off; when the job computes
on a GPU also cuDNN's benchmark mode, the cuBLAS workspace (:16:8 vs :4096:8), TF32 and the attention
(SDPA) kernels. 'same numbers' says whether a setting computes the job's own numbers bit for bit: a
thread count that changes them is what `verify --vary threads` calls sensitive.

The recommendation is the cheapest setting that was bit-exact and keeps PyTorch's guarantee, the
faster knobs combined and that combination measured too; paste its block into job.yaml. Settings
that give the guarantee up (deterministic algorithms off, cuDNN benchmark) are never recommended,
even when bit-exact here. Runs go to runs/<job>/.cost/.

exit: 0 measured, with a bit-exact recommendation; 1 the job is not bit-exact under its own
settings; 2 bad input; 3 the job failed under its own settings; 4 environment problem
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        commands,
        "cost",
        "measure what each determinism setting costs this job and which is the cheapest bit-exact one",
        COST_EPILOG,
        description="Measure what each determinism setting costs this job, on the job itself, and "
        "recommend the cheapest setting that is still bit-exact.",
    )
    add_run_flags(parser)
    parser.set_defaults(max_steps=DEFAULT_STEPS)
    parser.add_argument(
        "--runs", type=int, default=2, metavar="N", help="runs per setting, from 2 to 10 (default: 2)"
    )
    parser.add_argument(
        "--only",
        metavar="NAMES",
        help="measure only these settings besides the job's own, comma-separated as the table names "
        "them (e.g. tf32=true,threads=1)",
    )
    parser.set_defaults(handler=cost_command)


def cost_command(args: argparse.Namespace, out: Output) -> int:
    from reprobox import cost
    from reprobox.render.cost import cost_text

    if args.trail is not None:
        raise UsageError("cost records a hash trail on every step itself; leave --trail out")
    spec = load_job_with_flags(args)
    check_runs_dir(args.runs_dir)
    only = tuple(name.strip() for name in (args.only or "").split(",") if name.strip())
    options = cost.CostOptions(max_steps=args.max_steps, runs=args.runs, only=only)
    runtime = runtimes.open_runtime(args.runtime, runtime_options(args, spec))
    run_options = runner.RunOptions(runs_dir=args.runs_dir)
    result = cost.measure_cost(spec, runtime, run_options, options)
    out.result(result.to_json(), cost_text(result))
    return EXIT_OK if result.recommended is not None else EXIT_NOT_REPRODUCIBLE
