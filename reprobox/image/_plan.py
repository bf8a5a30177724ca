"""The build plan: the image a job's `image:` settings make, its build args and labels, and the tag
that names it, computed without an engine."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from reprobox._version import __version__
from reprobox.guest.filehash import file_sha256
from reprobox.image._context import (
    CONTEXT_EXTRA_REQUIREMENTS,
    CONTEXT_WHEELHOUSE,
    ContextFile,
    context_tar,
    project_members,
    write_context,
)
from reprobox.image._lock import check_extra_lock
from reprobox.image._project import ProjectFiles, default_base_image, project_files
from reprobox.image._wheelhouse import resolve_lock, wheel_members, wheelhouses
from reprobox.jobfile import ImageSpec
from reprobox.offline import BASE_IMAGE_VARIABLE, WHEELHOUSE_VARIABLE

IMAGE_REPOSITORY = "reprobox/env"
LABEL_PREFIX = "io.reprobox."
MANAGED_LABEL = f"{LABEL_PREFIX}managed"
TAG_HEX_LENGTH = 16
LOCK_VARIABLE = "REPROBOX_LOCK"


@dataclass(frozen=True)
class BuildPlan:
    """Everything needed to build (or find) the image of a job, computed without an engine."""

    tag: str
    build_digest: str  # sha256 over the context digest, the wheels' names and sizes, and the build args
    context_digest: str  # sha256 of the context tar without the wheels
    base_image: str
    lock: str  # path of the lock inside the context
    buildargs: Mapping[str, str]
    labels: Mapping[str, str]
    files: tuple[ContextFile, ...]
    wheels: tuple[ContextFile, ...] = ()
    wheelhouse: Path | None = None  # the first of `wheelhouses` (the job's own when it has one)
    context: bytes = field(default=b"", repr=False)  # the context tar without the wheels
    wheelhouses: tuple[Path, ...] = ()  # every wheelhouse the wheels come from: the job's, then the shared
    extra_requirements: Path | None = None  # the job's own lock on the host (image.requirements)

    @property
    def offline(self) -> bool:
        """True when pip installs from the wheelhouse alone."""
        return bool(self.wheelhouses)


def plan_build(
    image: ImageSpec | None = None,
    *,
    base_image: str | None = None,
    lock: str | None = None,
    wheelhouse: Path | None = None,
    environ: Mapping[str, str] | None = None,
    project: ProjectFiles | None = None,
) -> BuildPlan:
    """The build of the reprobox image for a job's `image:` settings (a prebuilt `reference` is not built).

    Precedence: the arguments (CLI flags), then the job file, then REPROBOX_BASE_IMAGE /
    REPROBOX_WHEELHOUSE / REPROBOX_LOCK, then the Dockerfile's pinned base. Without an explicit lock,
    a wheelhouse picks the first lock (cuda, then cpu) whose every wheel it holds.
    """
    image = image or ImageSpec()
    environ = os.environ if environ is None else environ
    project = project or project_files()
    base = base_image or image.base or environ.get(BASE_IMAGE_VARIABLE) or default_base_image(project)
    houses = wheelhouses(image, wheelhouse or _path_or_none(environ.get(WHEELHOUSE_VARIABLE)))
    lock_name = resolve_lock(lock or environ.get(LOCK_VARIABLE), project, houses)
    if image.requirements is not None:
        check_extra_lock(image.requirements, project.root / lock_name)

    files = list(project_members(project))
    if image.requirements is not None:
        files.append(ContextFile(CONTEXT_EXTRA_REQUIREMENTS, image.requirements))
    files.sort(key=lambda member: member.name)
    wheels = wheel_members(project, lock_name, houses, image.requirements) if houses else ()

    context = context_tar(files)
    context_digest = hashlib.sha256(context).hexdigest()
    buildargs = {
        "BASE_IMAGE": base,
        "LOCK": lock_name,
        "WHEELHOUSE": CONTEXT_WHEELHOUSE if houses else "",
        "EXTRA_REQUIREMENTS": CONTEXT_EXTRA_REQUIREMENTS if image.requirements is not None else "",
    }
    identity = {
        "context": context_digest,
        "wheels": [[w.name, w.source.stat().st_size] for w in wheels],
        "buildargs": buildargs,
    }
    build_digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    labels = {
        MANAGED_LABEL: "true",
        f"{LABEL_PREFIX}version": __version__,
        f"{LABEL_PREFIX}base": base,
        f"{LABEL_PREFIX}lock": lock_name,
        f"{LABEL_PREFIX}lock-digest": "sha256:" + file_sha256(project.root / lock_name),
        f"{LABEL_PREFIX}context-digest": "sha256:" + context_digest,
        f"{LABEL_PREFIX}build-digest": "sha256:" + build_digest,
        f"{LABEL_PREFIX}offline": "true" if houses else "false",
    }
    if image.requirements is not None:
        labels[f"{LABEL_PREFIX}extra-requirements-digest"] = "sha256:" + file_sha256(image.requirements)
    return BuildPlan(
        tag=f"{IMAGE_REPOSITORY}:{build_digest[:TAG_HEX_LENGTH]}",
        build_digest=build_digest,
        context_digest=context_digest,
        base_image=base,
        lock=lock_name,
        buildargs=buildargs,
        labels=labels,
        files=tuple(files),
        wheels=wheels,
        wheelhouse=houses[0] if houses else None,
        context=context,
        wheelhouses=houses,
        extra_requirements=image.requirements,
    )


def write_build_context(plan: BuildPlan, out: IO[bytes]) -> None:
    """The full context for the engine: the plan's files plus its wheels under wheelhouse/."""
    write_context(plan.files, out, plan.wheels)


def render_build_plan(plan: BuildPlan) -> dict[str, Any]:
    """The plan as JSON-ready data, for `--dry-run`: what would be built, from what, and under which name."""
    return {
        "tag": plan.tag,
        "build_digest": "sha256:" + plan.build_digest,
        "context_digest": "sha256:" + plan.context_digest,
        "base_image": plan.base_image,
        "lock": plan.lock,
        "offline": plan.offline,
        "wheelhouse": str(plan.wheelhouse) if plan.wheelhouse is not None else None,
        "wheelhouses": [str(house) for house in plan.wheelhouses],
        "buildargs": dict(plan.buildargs),
        "labels": dict(plan.labels),
        "files": [
            {"name": f.name, "source": str(f.source), "bytes": f.source.stat().st_size} for f in plan.files
        ],
        "wheels": [{"name": w.source.name, "bytes": w.source.stat().st_size} for w in plan.wheels],
    }


def _path_or_none(text: str | None) -> Path | None:
    return Path(text).expanduser() if text else None
