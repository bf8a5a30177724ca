"""`build` and `images`: the reprobox image of a job, built once and reused while nothing changes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox import jobfile
from reprobox.commands.common import add_command, add_image_flags, add_output_flags, image_build_flags
from reprobox.errors import EXIT_OK, SpecError
from reprobox.records.manifest import MANIFEST_NAME, read_record
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
  reprobox images                     reprobox images on this engine, and the jobs whose runs used them
  reprobox images --runs-dir /data/runs --json
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
        "list reprobox images and the jobs that used them",
        IMAGES_EPILOG,
        description="List the reprobox images on this engine with their base, lock and version, and the "
        "jobs whose recorded runs used each one.",
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
        out.result(
            rendered, "\n".join(f"{key}: {value}" for key, value in rendered.items() if key != "files")
        )
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
    from reprobox import engine

    found = engine.connect().list_images(["io.reprobox.image"])
    users = _jobs_by_image(args.runs_dir)
    rows: list[dict[str, Any]] = []
    for info in found:
        rows.append(
            {
                "id": info.id,
                "tags": list(info.tags),
                "base": info.labels.get("io.reprobox.base"),
                "lock": info.labels.get("io.reprobox.lock"),
                "reprobox_version": info.labels.get("io.reprobox.version"),
                "jobs": sorted(users.get(info.id, set())),
            }
        )
    lines = [
        f"{', '.join(r['tags']) or r['id'][:19]}  base {r['base']}  jobs: {', '.join(r['jobs']) or '-'}"
        for r in rows
    ]
    out.result(
        {"images": rows},
        "\n".join(lines) or "no reprobox images on this engine; build one: reprobox build JOB",
    )
    return EXIT_OK


def _jobs_by_image(runs_dir: Path) -> dict[str, set[str]]:
    """Image id -> names of jobs with a recorded run in that image."""
    users: dict[str, set[str]] = {}
    for manifest in runs_dir.glob(f"*/*/{MANIFEST_NAME}"):
        try:
            record = read_record(manifest)
        except SpecError:  # a damaged record elsewhere must not break the listing
            continue
        if record.image_id:
            users.setdefault(record.image_id, set()).add(record.job_name)
    return users
