"""`init`: write a job file for the command a researcher already types, from one short observed run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox.commands.common import add_command, add_output_flags, check_output_file
from reprobox.errors import EXIT_OK

if TYPE_CHECKING:
    from reprobox.commands.output import Output

INIT_EPILOG = """\
examples:
  reprobox init -- python train.py --epochs 3          in your training repo, as its README runs it
  reprobox init --seconds 300 -- python main.py         give a slow start more time
  reprobox init --force -- python train.py              write over an existing job.yaml
  reprobox init --json -- python train.py | jq .outputs

The command runs once, in a writable copy of the folder (on the local runtime: your own Python and
packages), with what your git ignores mounted read-only where it lies, until it writes its first
checkpoint or its budget is spent: 60 s of its own CPU time by default (--seconds), so that a busy
machine gives it the same progress as an idle one, and never more than 4 times that by the clock:
never a whole training. From what it did, job.yaml says:
  workdir: copy   it runs in a copy of its folder; what it writes or changes there is its output
  compare         its *.log files and profiler traces, listed not compared (TensorBoard, W&B, MLflow and
                  Hydra records are compared: their numbers read, their stamps excused)
  data            what it read that is not code (git-ignored files beside it, folders elsewhere)
  env             variables it read that your shell sets (secrets as ${NAME}, never their values)
  image           packages its code imports that the reprobox image lacks, each with where (requirements.in,
                  locked); its repository's own package, installed from the tree, is code, not locked
  resume          HF Trainer or Lightning checkpoints it can be resumed from
each with a comment saying why. Then: reprobox verify job.yaml.

exit: 0 written; 2 bad input (no command, a command not found, job.yaml exists without --force);
3 the command failed in its short run or wrote no file (nothing is written then)
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        commands,
        "init",
        "write job.yaml for a command, from one short observed run of it",
        INIT_EPILOG,
        description="Write job.yaml for the command you train with, learnt from one short observed run.",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=60.0,
        metavar="N",
        help="stop the short run once it has used N seconds of CPU time (and N seconds by the clock) "
        "without writing a checkpoint; never after more than 4N seconds by the clock (default: 60)",
    )
    parser.add_argument(
        "--job-file", type=Path, default=Path("job.yaml"), help="where to write (default: ./job.yaml)"
    )
    parser.add_argument("--force", action="store_true", help="write over an existing job file")
    add_output_flags(parser)
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the training command"
    )
    parser.set_defaults(handler=init_command)


def init_command(args: argparse.Namespace, out: Output) -> int:
    from reprobox import scaffold

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    job_file = args.job_file if args.job_file.is_absolute() else Path.cwd() / args.job_file
    check_output_file(args.job_file, "--job-file", example="job.yaml")  # before the short run
    options = scaffold.InitOptions(
        command=tuple(command),
        folder=job_file.parent,
        job_file=job_file,
        seconds=args.seconds,
        force=args.force,
    )
    result = scaffold.init_job(options)
    written = ", ".join(str(p) for p in result.written)
    out.result(
        result.to_json(),
        f"{result.text}\nwrote {written}\nnext: reprobox verify {args.job_file}",
    )
    return EXIT_OK
