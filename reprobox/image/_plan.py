"""The build plan: the image a job's `image:` settings make (the shared image, plus one layer of the job's
extra packages when it has any), each build's args and labels, and the tags that name them, computed
without an engine."""

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
    CONTEXT_WHEELHOUSE,
    ContextFile,
    context_tar,
    project_members,
    write_context,
)
from reprobox.image._extras import (
    EXTRAS_DOCKERFILE,
    EXTRAS_LOCK,
    EXTRAS_SOURCE,
    extras_dockerfile,
    extras_lock_text,
    extras_names,
)
from reprobox.image._lock import check_extra_lock
from reprobox.image._project import ProjectFiles, default_base_image, project_files
from reprobox.image._wheelhouse import resolve_lock, wheel_members, wheelhouses
from reprobox.jobfile import ImageSpec
from reprobox.offline import BASE_IMAGE_VARIABLE, WHEELHOUSE_VARIABLE

IMAGE_REPOSITORY = "reprobox/env"
LABEL_PREFIX = "io.reprobox."
MANAGED_LABEL = f"{LABEL_PREFIX}managed"
SHARED_IMAGE_LABEL = f"{LABEL_PREFIX}shared-image"
TAG_HEX_LENGTH = 16
LOCK_VARIABLE = "REPROBOX_LOCK"


@dataclass(frozen=True)
class BuildPlan:
    """One image build, computed without an engine: the shared image, or a job's extras over it (`shared`)."""

    tag: str
    build_digest: str  # sha256 over the context digest, the wheels' names and sizes, and the build args
    context_digest: str  # sha256 of the context tar without the wheels (and an extras image's LABEL line)
    base_image: str  # the base the shared image starts from (for a job's extras too)
    lock: str  # path of the image's lock inside the shared image's context
    buildargs: Mapping[str, str]
    labels: Mapping[str, str]
    files: tuple[ContextFile, ...]
    wheels: tuple[ContextFile, ...] = ()
    wheelhouse: Path | None = None  # the first of `wheelhouses` (the job's own when it has one)
    context: bytes = field(default=b"", repr=False)  # the context tar without the wheels
    wheelhouses: tuple[Path, ...] = ()  # every wheelhouse the wheels come from: the job's, then the shared
    extra_requirements: Path | None = None  # the job's own lock on the host (image.requirements)
    shared: BuildPlan | None = None  # the shared image this build adds the job's extras to

    @property
    def offline(self) -> bool:
        """True when pip installs from the wheelhouse alone."""
        return bool(self.wheelhouses)

    @property
    def builds(self) -> tuple[BuildPlan, ...]:
        """The builds that make this image, the shared image first."""
        return (*(self.shared.builds if self.shared is not None else ()), self)


def plan_build(
    image: ImageSpec | None = None,
    *,
    base_image: str | None = None,
    lock: str | None = None,
    wheelhouse: Path | None = None,
    environ: Mapping[str, str] | None = None,
    project: ProjectFiles | None = None,
) -> BuildPlan:
    """The build of the reprobox image for a job's `image:` settings (a prebuilt `reference` is not built):
    the shared image, or, for a job with `requirements`, one layer of them over it.

    Precedence: the arguments (CLI flags), then the job file, then REPROBOX_BASE_IMAGE /
    REPROBOX_WHEELHOUSE / REPROBOX_LOCK, then the Dockerfile's pinned base. Without an explicit lock,
    a wheelhouse picks the first lock (cuda, then cpu) whose every wheel it holds. Every wheel either
    build needs is looked for before any build.
    """
    image = image or ImageSpec()
    environ = os.environ if environ is None else environ
    project = project or project_files()
    base = base_image or image.base or environ.get(BASE_IMAGE_VARIABLE) or default_base_image(project)
    houses = wheelhouses(image, wheelhouse or _path_or_none(environ.get(WHEELHOUSE_VARIABLE)))
    lock_name = resolve_lock(lock or environ.get(LOCK_VARIABLE), project, houses)
    if image.requirements is not None:
        check_extra_lock(image.requirements, project.root / lock_name)
    shared = _plan_shared(project, base, lock_name, houses)
    if image.requirements is None:
        return shared
    return _plan_extras(shared, image.requirements, project)


def _plan_shared(project: ProjectFiles, base: str, lock_name: str, houses: tuple[Path, ...]) -> BuildPlan:
    files = tuple(sorted(project_members(project), key=lambda member: member.name))
    wheels = wheel_members([project.root / lock_name], houses, project.root) if houses else ()
    buildargs = {"BASE_IMAGE": base, "LOCK": lock_name, "WHEELHOUSE": CONTEXT_WHEELHOUSE if houses else ""}
    context, context_digest, build_digest = _identity(files, wheels, buildargs)
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
    return BuildPlan(
        tag=f"{IMAGE_REPOSITORY}:{build_digest[:TAG_HEX_LENGTH]}",
        build_digest=build_digest,
        context_digest=context_digest,
        base_image=base,
        lock=lock_name,
        buildargs=buildargs,
        labels=labels,
        files=files,
        wheels=wheels,
        wheelhouse=houses[0] if houses else None,
        context=context,
        wheelhouses=houses,
    )


def _plan_extras(shared: BuildPlan, requirements: Path, project: ProjectFiles) -> BuildPlan:
    """The job's extras as one layer over `shared`, tagged by the shared image and the extras' digest."""
    lock_text = extras_lock_text(requirements)
    lock_file = ContextFile(EXTRAS_LOCK, requirements, data=lock_text)
    houses = shared.wheelhouses
    wheels = wheel_members([requirements], houses, project.root) if houses else ()
    buildargs = {"SHARED_IMAGE": shared.tag, "WHEELHOUSE": CONTEXT_WHEELHOUSE if houses else ""}
    unlabelled = (ContextFile("Dockerfile", EXTRAS_SOURCE, data=EXTRAS_DOCKERFILE.encode()), lock_file)
    _, context_digest, build_digest = _identity(
        unlabelled, wheels, {**buildargs, "SHARED_BUILD": shared.build_digest}
    )
    labels = {
        **shared.labels,
        f"{LABEL_PREFIX}context-digest": "sha256:" + context_digest,
        f"{LABEL_PREFIX}build-digest": "sha256:" + build_digest,
        f"{LABEL_PREFIX}extra-requirements-digest": "sha256:" + hashlib.sha256(lock_text).hexdigest(),
        f"{LABEL_PREFIX}extras": extras_names(lock_text),
        SHARED_IMAGE_LABEL: shared.tag,
        f"{LABEL_PREFIX}shared-build-digest": "sha256:" + shared.build_digest,
    }
    files = (ContextFile("Dockerfile", EXTRAS_SOURCE, data=extras_dockerfile(labels)), lock_file)
    context = context_tar(files)
    return BuildPlan(
        tag=f"{shared.tag}-{build_digest[:TAG_HEX_LENGTH]}",
        build_digest=build_digest,
        context_digest=context_digest,
        base_image=shared.base_image,
        lock=shared.lock,
        buildargs=buildargs,
        labels=labels,
        files=files,
        wheels=wheels,
        wheelhouse=shared.wheelhouse,
        context=context,
        wheelhouses=houses,
        extra_requirements=requirements,
        shared=shared,
    )


def _identity(
    files: tuple[ContextFile, ...], wheels: tuple[ContextFile, ...], buildargs: Mapping[str, str]
) -> tuple[bytes, str, str]:
    """The context tar without the wheels, its digest, and the build digest that names the image: the
    wheels enter by name and size only (pip checks their hashes; hashing GBs per check would be slow)."""
    context = context_tar(files)
    context_digest = hashlib.sha256(context).hexdigest()
    identity = {
        "context": context_digest,
        "wheels": [[w.name, w.size] for w in wheels],
        "buildargs": dict(buildargs),
    }
    build_digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return context, context_digest, build_digest


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
        "files": [{"name": f.name, "source": str(f.source), "bytes": f.size} for f in plan.files],
        "wheels": [{"name": w.source.name, "bytes": w.size} for w in plan.wheels],
        **({"shared": render_build_plan(plan.shared)} if plan.shared is not None else {}),
    }


def _path_or_none(text: str | None) -> Path | None:
    return Path(text).expanduser() if text else None
