"""Arguments and steps shared by several subcommands."""

from __future__ import annotations

import argparse
from pathlib import Path

from reprobox import jobfile, runtimes
from reprobox.commands.targets import check_output_file, check_output_folder
from reprobox.errors import UsageError
from reprobox.runner import runs_dir_default
from reprobox.runtimes.base import RuntimeOptions

__all__ = ["check_output_file", "check_output_folder"]  # the output checks live in `targets`

Commands = argparse._SubParsersAction  # the `add_subparsers()` object every command module registers on


def add_command(
    commands: Commands[argparse.ArgumentParser],
    name: str,
    summary: str,
    epilog: str,
    *,
    description: str = "",
) -> argparse.ArgumentParser:
    """A subcommand whose --help shows the summary, a description and the examples epilog as written."""
    return commands.add_parser(
        name,
        help=summary,
        description=description or summary[0].upper() + summary[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_image_flags(parser: argparse.ArgumentParser) -> None:
    """How the reprobox image is built when a command needs it (offline machines set these once)."""
    parser.add_argument(
        "--base-image",
        help="base image (default: $REPROBOX_BASE_IMAGE, else the Dockerfile's pinned CUDA base)",
    )
    parser.add_argument(
        "--wheelhouse", type=Path, help="local wheels for offline builds (default: $REPROBOX_WHEELHOUSE)"
    )
    parser.add_argument(
        "--lock", help="lock file: cpu, cuda or a path under env/ (default: chosen by the wheelhouse)"
    )
    parser.add_argument(
        "--cuda",
        action="store_true",
        help="the CUDA image from torch's CUDA wheels (the cuda lock), on the offline base unless "
        "--base-image or $REPROBOX_BASE_IMAGE names another: no CUDA base image needed",
    )


def image_build_flags(
    args: argparse.Namespace, spec: jobfile.ImageSpec | None = None
) -> tuple[str | None, str | None]:
    """(--base-image, --lock) as the image build takes them; with --cuda, the CUDA image's."""
    base_image, lock = getattr(args, "base_image", None), getattr(args, "lock", None)
    if not getattr(args, "cuda", False):
        return base_image, lock
    from reprobox.image import cuda_build  # only when asked: most commands never build

    return cuda_build(spec, base_image=base_image, lock=lock)


def add_replay_flags(parser: argparse.ArgumentParser, *, runs: str, folder: str) -> None:
    """Where a command that replays recorded runs replays them: their own runtime unless told otherwise,
    in a hidden folder of the job's runs so replays never mix with the runs they check."""
    parser.add_argument(
        "--runtime",
        choices=runtimes.names(),
        help=f"where to replay (default: the runtime {runs} ran on)",
    )
    parser.add_argument(
        "--runs-dir",
        type=Path,
        default=runs_dir_default(),
        help=f"where replays go, under <job>/{folder}/ (default: ./runs, or $REPROBOX_RUNS_DIR)",
    )
    add_image_flags(parser)


def runtime_options(args: argparse.Namespace, job: jobfile.JobSpec | None = None) -> RuntimeOptions:
    """The runtime flags as the library takes them, made once per command (absent flags: the defaults)."""
    base_image, lock = image_build_flags(args, job.image if job is not None else None)
    return RuntimeOptions(
        base_image=base_image,
        wheelhouse=getattr(args, "wheelhouse", None),
        lock=lock,
        image=getattr(args, "image", None),
        job=job,
        slurm_container=getattr(args, "slurm_container", None),
        sbatch_args=getattr(args, "sbatch_args", None),
    )


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object on stdout (text goes to stderr)"
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="do not stream the job's output or progress"
    )


def add_run_flags(parser: argparse.ArgumentParser, *, job_help: str = "", job_optional: bool = False) -> None:
    """The job and the flags of every command that runs it; `job_optional` leaves the check to the
    command (verify's `--vary list` needs no job)."""
    parser.add_argument(
        "job",
        type=Path,
        metavar="JOB",
        nargs="?" if job_optional else None,
        help="a job.yaml file, or a folder holding one" + job_help,
    )
    parser.add_argument(
        "--runtime",
        choices=runtimes.names(),
        default=runtimes.AUTO,
        help=f"where to run: one of {', '.join(runtimes.RUNTIMES)} (docker: a hardened container; local: "
        "a subprocess here; slurm: sbatch jobs, the runs dir shared with the nodes); auto = docker when "
        "an engine answers, else local (default: auto)",
    )
    parser.add_argument(
        "--slurm-container",
        choices=("none", "docker"),
        help="with --runtime slurm: run on the node in its prepared environment (none) or in the job's "
        "image (docker) (default: $REPROBOX_SLURM_CONTAINER or none)",
    )
    parser.add_argument(
        "--sbatch-args",
        metavar="ARGS",
        help="with --runtime slurm: extra sbatch options, e.g. '--partition=gpu --account=lab' "
        "(default: $REPROBOX_SBATCH_ARGS)",
    )
    parser.add_argument(
        "--runs-dir",
        type=Path,
        default=runs_dir_default(),
        help="where run directories go (default: ./runs, or $REPROBOX_RUNS_DIR)",
    )
    add_image_flags(parser)
    parser.add_argument("--seed", type=int, metavar="N", help="override the job's seed (0 to 4294967295)")
    parser.add_argument("--trail", type=int, metavar="K", help="record a hash trail every K optimizer steps")
    parser.add_argument(
        "--max-steps",
        type=int,
        metavar="K",
        help="stop the job cleanly after K optimizer steps (a prefix check: the trail is the evidence)",
    )
    add_output_flags(parser)


def load_job_with_flags(args: argparse.Namespace) -> jobfile.JobSpec:
    """The job file with the command-line overrides (--seed, --trail) applied and checked."""
    spec = jobfile.load_job(args.job)
    if args.trail is not None:
        if args.trail < 1:
            raise UsageError("--trail must be a positive number of optimizer steps, e.g. --trail 10")
        spec = spec.with_overrides(trail=jobfile.Trail(every=args.trail))
    if args.seed is not None:
        if not 0 <= args.seed <= jobfile.MAX_SEED:
            raise UsageError(f"--seed must be from 0 to {jobfile.MAX_SEED}, not {args.seed}")
        spec = spec.with_overrides(seed=args.seed)
    if args.max_steps is not None and args.max_steps < 1:
        raise UsageError("--max-steps must be a positive number of optimizer steps, e.g. --max-steps 100")
    return spec


def check_runs_dir(runs_dir: Path) -> None:
    """Refuse a runs dir that cannot hold run directories before any run starts (exit 2, not a traceback)."""
    check_output_folder(runs_dir, "--runs-dir", "pass a folder you can write, e.g. --runs-dir ./runs")


def check_report_targets(html: Path | None, markdown: Path | None) -> None:
    """--html FILE and --markdown FILE (with the plot a Markdown report writes beside it, FILE.png)."""
    if html is not None:
        check_output_file(html, "--html", example="./report.html")
    if markdown is not None:
        check_output_file(markdown, "--markdown", example="./report.md")
        check_output_file(markdown.with_suffix(".png"), "--markdown", example="./report.md")


def check_attestation_target(args: argparse.Namespace, job_file: Path) -> None:
    """A bad --sign key or an unwritable attestation path is refused before the first run."""
    if args.no_attestation or args.max_steps is not None:
        return
    from reprobox import attest

    if args.sign is not None:
        attest.load_private_key(args.sign)  # raises UsageError naming the key and the fix
    check_output_file(args.attestation or attest.attestation_path_for(job_file), "--attestation")
