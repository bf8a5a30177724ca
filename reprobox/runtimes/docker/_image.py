"""The job's image (built, reused or pulled), the facts recorded about it, and the fingerprint inside it."""

from __future__ import annotations

import collections
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reprobox import image as image_module
from reprobox import progress, signals
from reprobox.engine import BuildFailed, Engine, GpuUnavailable, ImageInfo
from reprobox.errors import EnvironmentProblem, NotEnoughSpace
from reprobox.jobfile import ImageSpec
from reprobox.pipfailure import explain_pip_failure
from reprobox.runtimes.docker._settings import CONTAINER_HOME, hardened_settings

FINGERPRINT_TIMEOUT = 300.0
BUILD_LOG_LINES = 500  # what a failed build's install step is read from


def ensure_image(
    spec: ImageSpec,
    *,
    engine: Engine,
    base_image: str | None = None,
    wheelhouse: Path | None = None,
    lock: str | None = None,
    rebuild: bool = False,
    network: bool = True,
    project: image_module.ProjectFiles | None = None,
) -> ImageInfo:
    """The job's image: a prebuilt reference as is, or the reprobox image, reused by tag or built now;
    for a job with extra packages, the shared image (reused or built first) plus one layer of them.

    `network=False` builds with no network at all (every wheel must come from the wheelhouse);
    `project` builds from another source checkout than this package's. What it does goes to the
    current progress reporter: notices, and the build's (or pull's) output line by line.
    """
    if spec.reference:
        if engine.image_exists(spec.reference):
            return engine.inspect_image(spec.reference)
        progress.say(f"pulling {spec.reference} ...")
        return engine.pull(spec.reference, progress.build_output)
    plan = image_module.plan_build(
        spec, base_image=base_image, lock=lock, wheelhouse=wheelhouse, project=project
    )
    if plan.shared is not None:
        _built_or_reused(plan.shared, engine, rebuild=False, network=network)
    return _built_or_reused(plan, engine, rebuild=rebuild, network=network)


def _built_or_reused(
    plan: image_module.BuildPlan, engine: Engine, *, rebuild: bool, network: bool
) -> ImageInfo:
    """The image of one build: found by its tag, or built now (a job's extras over the shared image)."""
    if not rebuild and engine.image_exists(plan.tag):
        progress.say(f"image {plan.tag} is up to date; no build needed")
        return engine.inspect_image(plan.tag)
    offline = ", offline from the wheelhouse" if plan.offline else ""
    if plan.shared is not None:
        count = len(image_module.locked_pins(plan.extra_requirements)) if plan.extra_requirements else 0
        progress.say(
            f"building image {plan.tag}: {count} extra package{'s' if count != 1 else ''} "
            f"over {plan.shared.tag}{offline} ..."
        )
    else:
        progress.say(f"building image {plan.tag} from {plan.base_image} ({plan.lock}{offline}) ...")
    _check_space(plan, engine)
    log: collections.deque[str] = collections.deque(maxlen=BUILD_LOG_LINES)

    def record(line: str) -> None:
        log.append(line)
        progress.build_output(line)

    with tempfile.TemporaryFile() as context:
        image_module.write_build_context(plan, context)
        context.seek(0)
        try:
            return engine.build(
                context,
                plan.tag,
                plan.buildargs,
                plan.labels if plan.shared is None else {},  # an extras Dockerfile carries its labels
                record,
                base_image=plan.shared.tag if plan.shared is not None else plan.base_image,
                network=network,
            )
        except BuildFailed as exc:
            # pip's retries and tables say it in pip's terms; the user gets the lock line and the fix.
            explained = explain_pip_failure(list(log), plan)
            if explained is None:
                raise
            raise explained from exc


def _check_space(plan: image_module.BuildPlan, engine: Engine) -> None:
    """Refuse an offline build the engine's disk cannot hold, before it spends minutes to fail at its
    last step; an online build's wheels are not known beforehand, nor a remote engine's disk."""
    if not plan.wheels:
        return
    storage = engine.image_storage()
    if storage is None:
        return
    folder, free = storage
    needed = image_module.build_space_floor(plan.wheels)
    if free < needed:
        raise NotEnoughSpace(f"building image {plan.tag}", folder, needed, free)


def image_facts(image: ImageInfo) -> dict[str, Any]:
    return {
        "id": image.id,
        "repo_digest": image.repo_digest,
        "repo_digests": list(image.repo_digests),
        "tags": list(image.tags),
        "labels": dict(image.labels),
    }


def image_fingerprint(
    engine: Engine, image: ImageInfo, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The fingerprint as seen inside the image, torch imported, in a hardened throwaway container
    (`extra`: create arguments an engine needs besides, such as Podman's rlimits)."""
    created = hardened_settings(image, host_uid=os.getuid(), host_gid=os.getgid())
    created.update(
        entrypoint=["python3"],
        command=["-m", "reprobox.guest.fingerprint", "--import-torch"],
        working_dir=CONTAINER_HOME,
        **(extra or {}),
    )
    try:
        return _fingerprint_container(
            engine, {**created, "device_requests": [{"count": -1, "capabilities": [["gpu"]]}]}
        )
    except _NoGpuRuntime:
        return _fingerprint_container(
            engine, {**created, "environment": {**created["environment"], "NVIDIA_VISIBLE_DEVICES": "void"}}
        )


class _NoGpuRuntime(Exception):
    """The engine cannot hand GPUs to containers here."""


def _fingerprint_container(engine: Engine, created: dict[str, Any]) -> dict[str, Any]:
    container_id: str | None = None
    try:
        try:
            with signals.held():  # a signal waits for the id, so the probe is removed
                container_id = engine.create_container(created)
            engine.start(container_id)
        except GpuUnavailable as exc:
            if created.get("device_requests"):
                raise _NoGpuRuntime from exc
            raise
        status = engine.wait(container_id, timeout=FINGERPRINT_TIMEOUT)
        if status != 0:
            raise EnvironmentProblem(
                f"the fingerprint probe in image {created['image'][:19]} exited with status {status}; "
                "check that the image has python3 with reprobox installed",
                log_tail=engine.output(container_id, stdout=False, stderr=True).decode(errors="replace")[
                    -4000:
                ],
            )
        result: dict[str, Any] = json.loads(engine.output(container_id))
        return result
    finally:
        if container_id is not None:
            engine.remove_container(container_id)
