"""`build` and `images`: the reprobox image of a job, built once and reused while nothing changes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox import jobfile
from reprobox.commands.common import add_command, add_image_flags, add_output_flags, image_build_flags
from reprobox.errors import EXIT_OK
from reprobox.runner import runs_dir_default

if TYPE_CHECKING:
    from reprobox.commands.output import Output

BUILD_EPILOG = """\
examples:
  reprobox build examples/tiny-mlp/job.yaml                       build (or reuse) the job's image
  reprobox build job.yaml --base-image reprobox/offline-base:bookworm --wheelhouse ./wheelhouse
  reprobox build job.yaml --dry-run --json                        the tag, base, lock and build args only
  reprobox build --cuda --wheelhouse ~/wheels-cuda                the CUDA image from torch's CUDA wheels

The tag is a hash of the build context and arguments: an unchanged job reuses its image with no build
step. Without a registry: `reprobox offline-base` makes the base REPROBOX_BASE_IMAGE names, and
`reprobox lock --base cpu --wheelhouse DIR` (where the package index answers) the wheelhouse
REPROBOX_WHEELHOUSE names.
"""

IMAGES_EPILOG = """\
examples:
  reprobox images                     reprobox images on this engine, their size, and the runs that used them
  reprobox images --runs-dir /data/runs --json

A job with extra packages gets the shared image plus one layer of them: its line says what that layer adds.
Remove the images no run record uses with `reprobox clean --images` (`--dry-run` first).
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    build = add_command(
        commands,
        "build",
        "build the job's image (or reuse it when nothing changed)",
        BUILD_EPILOG,
        description="Build the reprobox image for a job: pinned base, hash-locked stack, deterministic "
        "environment, non-root user, the guest as entrypoint.",
    )
    build.add_argument(
        "job", nargs="?", type=Path, metavar="JOB", help="a job.yaml (default: the plain reprobox image)"
    )
    add_image_flags(build)
    build.add_argument("--rebuild", action="store_true", help="build even if an image with this tag exists")
    build.add_argument("--dry-run", action="store_true", help="show what would be built, without an engine")
    add_output_flags(build)
    build.set_defaults(handler=build_command)

    images = add_command(
        commands,
        "images",
        "list reprobox images, their size, and the jobs and runs that used them",
        IMAGES_EPILOG,
        description="List the reprobox images on this engine: each shared image with its size and base, "
        "each job's extras image with what it adds over its shared image, and the jobs and run records "
        "that used each one.",
    )
    images.add_argument("--runs-dir", type=Path, default=runs_dir_default(), help="where to look for runs")
    add_output_flags(images)
    images.set_defaults(handler=images_command)


def build_command(args: argparse.Namespace, out: Output) -> int:
    from reprobox import image as image_module

    spec = jobfile.load_job(args.job).image if args.job is not None else jobfile.ImageSpec()
    base_image, lock = image_build_flags(args, spec)
    if args.dry_run:
        plan = image_module.plan_build(spec, base_image=base_image, lock=lock, wheelhouse=args.wheelhouse)
        rendered = image_module.render_build_plan(plan)
        shown = [f"{key}: {value}" for key, value in rendered.items() if key not in ("files", "shared")]
        if plan.shared is not None:  # a job's extras: one layer over the shared image, built first if missing
            shown.append(f"shared image: {plan.shared.tag}")
        out.result(rendered, "\n".join(shown))
        return EXIT_OK
    from reprobox import engine
    from reprobox.runtimes.docker import ensure_image

    info = ensure_image(
        spec,
        engine=engine.connect(),
        base_image=base_image,
        wheelhouse=args.wheelhouse,
        lock=lock,
        rebuild=args.rebuild,
    )
    data = {"id": info.id, "tags": list(info.tags), "repo_digest": info.repo_digest, "labels": info.labels}
    out.result(data, f"image {', '.join(info.tags) or info.id}\n  id {info.id}")
    return EXIT_OK


def images_command(args: argparse.Namespace, out: Output) -> int:
    from reprobox import engine, imageuse

    uses = imageuse.image_uses(engine.connect(), args.runs_dir)
    lines = []
    for use in uses:
        if use.shared is not None:
            count = len(use.info.labels.get("io.reprobox.extras", "").split())
            what = f"+{imageuse.size_text(use.adds)}: {count} extra packages over {use.shared}"
        else:
            what = (
                f"{imageuse.size_text(use.info.size)}  base {use.info.labels.get('io.reprobox.base') or '-'}"
            )
        jobs = ", ".join(
            f"{job} ({runs} run{'s' if runs != 1 else ''})" for job, runs in sorted(use.jobs.items())
        )
        lines.append(f"{use.name}  {what}\n  jobs: {jobs or '-'}")
    if uses:
        unused = sum(1 for use in uses if not use.runs)
        lines.append(
            f"{unused} of {len(uses)} images no run record under {args.runs_dir} uses; "
            "`reprobox clean --images --dry-run` lists what removing them frees"
        )
    out.result(
        {"images": [use.to_json() for use in uses], "runs_dir": str(args.runs_dir)},
        "\n".join(lines) or "no reprobox images on this engine; build one: reprobox build JOB",
    )
    return EXIT_OK
