"""Fixtures for tests against the real Docker engine (never mocked).

Every image and container a test creates is recorded and removed at the end of the session. The
offline base image and the wheelhouse are machine prerequisites: when missing they are made with the
project's scripts and kept, like any other cache.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reprobox import image, progress
from reprobox.engine import Engine, EngineUnavailable, ImageInfo, connect
from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.image import MANAGED_LABEL
from reprobox.jobfile import ImageSpec
from reprobox.runtimes.docker import ensure_image
from tests.image_checkout import copy_image_files

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
OFFLINE_BASE = os.environ.get("REPROBOX_OFFLINE_BASE", "reprobox/offline-base:bookworm")
CACHE = Path(os.environ.get("REPROBOX_CACHE", Path.home() / ".cache" / "reprobox"))
ENABLE_HINT = "start one with `scripts/start-docker.sh`, then run `pytest --integration`"


@dataclass
class Created:
    """What the tests made on the engine, removed at the end of the session."""

    images: list[str] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BuiltImage:
    info: ImageInfo
    plan: image.BuildPlan
    progress: list[str]
    seconds: float


@pytest.fixture(scope="session")
def engine() -> Engine:
    try:
        return connect(timeout=5)
    except EngineUnavailable as exc:
        pytest.skip(f"no Docker engine answers ({exc.message}); {ENABLE_HINT}")


@pytest.fixture(scope="session")
def created(engine: Engine) -> Iterator[Created]:
    record = Created()
    yield record
    for run_id in record.run_ids:
        record.containers.extend(engine.list_containers({"io.reprobox.run-id": run_id}))
    for container in record.containers:
        engine.remove_container(container)
    for ref in reversed(record.images):
        engine.remove_image(ref, force=True)


@pytest.fixture(scope="session")
def offline_base(engine: Engine) -> str:
    if not engine.image_exists(OFFLINE_BASE):
        if os.geteuid() != 0:
            pytest.skip(f"{OFFLINE_BASE} is missing; build it with `scripts/build-offline-base.sh`")
        subprocess.run(["bash", str(SCRIPTS / "build-offline-base.sh"), "--tag", OFFLINE_BASE], check=True)
    return OFFLINE_BASE


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    house = Path(os.environ.get("REPROBOX_WHEELHOUSE") or CACHE / "wheelhouse")
    try:
        image.plan_build(lock="cpu", wheelhouse=house, environ={})
    except (EnvironmentProblem, UsageError):
        subprocess.run(["bash", str(SCRIPTS / "fill-wheelhouse.sh"), "--dest", str(house)], check=True)
    return house


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory) -> image.ProjectFiles:
    """This checkout's image files plus a marker, so the session builds (and removes) an image of its own.

    A build removes the stage that installs the stack, so this build installs it again (about a minute);
    its layer is the same bytes as every other build's of that lock, which the engine stores once.
    """
    project = copy_image_files(tmp_path_factory.mktemp("checkout"))
    (project.root / "reprobox" / "integration-test-marker.txt").write_text(uuid.uuid4().hex)
    return project


@pytest.fixture(scope="session")
def built_image(
    engine: Engine, offline_base: str, wheelhouse: Path, project: image.ProjectFiles, created: Created
) -> BuiltImage:
    """The real reprobox image, built offline (no network in any build step) from the base and wheelhouse."""
    plan = image.plan_build(
        base_image=offline_base, wheelhouse=wheelhouse, lock="cpu", project=project, environ={}
    )
    assert not engine.image_exists(plan.tag)
    started = time.monotonic()
    with progress.reporting(progress.Recorder()) as reported:
        info = ensure_image(
            ImageSpec(),
            engine=engine,
            base_image=offline_base,
            wheelhouse=wheelhouse,
            lock="cpu",
            network=False,
            project=project,
        )
    created.images.append(plan.tag)
    return BuiltImage(info=info, plan=plan, progress=reported.lines, seconds=time.monotonic() - started)


@pytest.fixture
def containers_added() -> Callable[[Engine, set[str]], list[str]]:
    """What names reprobox's containers left since `before`, each with its name, state and labels, so a
    failing test says which one was left and what made it."""
    return _containers_added


def _containers_added(engine: Engine, before: set[str]) -> list[str]:
    added = []
    for container_id in set(engine.list_containers([MANAGED_LABEL])) - before:
        try:
            facts = engine.inspect_container(container_id)
        except Exception as error:  # noqa: BLE001 - gone since it was listed: say so
            added.append(f"{container_id[:12]} (gone: {type(error).__name__})")
            continue
        state = facts.get("State") or {}
        config = facts.get("Config") or {}
        added.append(
            f"{container_id[:12]} {facts.get('Name')} {state.get('Status')} created {facts.get('Created')} "
            f"cmd {config.get('Cmd')} labels {sorted((config.get('Labels') or {}).items())}"
        )
    return added
