"""Building the real image offline, reusing it unchanged, what is inside it, and a missing base."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from reprobox import image, progress
from reprobox.engine import Engine
from reprobox.errors import EnvironmentProblem
from reprobox.jobfile import ImageSpec
from reprobox.runtimes.docker import ensure_image

pytestmark = pytest.mark.integration


def test_offline_build_runs_every_step_without_network(built_image: Any) -> None:
    steps = [line for line in built_image.progress if re.match(r"^Step \d+/\d+ : ", line)]
    assert steps, "the build streamed no steps"
    assert any("pip install" in line or "RUN python3 -m venv" in line for line in steps)
    assert built_image.info.tags == (built_image.plan.tag,)


def test_the_build_leaves_no_builder_stage_behind(engine: Engine, built_image: Any) -> None:
    """The stage that held the wheelhouse while pip read it is gone: the image that ended each stage
    (the last `---> ID` before the next FROM) exists only where the final image is built on it."""
    ends, last = [], None
    for line in built_image.progress:
        made = re.match(r"^\s*---> ([0-9a-f]{12})$", line)
        if made:
            last = made.group(1)
        elif re.match(r"^Step \d+/\d+ : FROM ", line) and last is not None:
            ends.append(last)
    assert len(ends) == 2, "two stages before the last: the runtime and the builder"
    kept = [end for end in ends if engine.image_exists(end)]
    for end in kept:
        layers = engine.inspect_image(end).layers
        assert built_image.info.layers[: len(layers)] == layers, f"stage image {end} was left behind"
    assert len(kept) == 1, "the builder stage's image was removed"


def test_image_carries_its_labels_and_non_root_user(built_image: Any) -> None:
    labels = built_image.info.labels
    for key, value in built_image.plan.labels.items():
        assert labels[key] == value
    assert labels["io.reprobox.lock"] == "env/requirements-cpu.lock"
    assert labels["io.reprobox.context-digest"] == f"sha256:{built_image.plan.context_digest}"
    assert built_image.info.user == "10001:10001"


def test_unchanged_context_reuses_the_image_without_a_build_step(
    engine: Engine, built_image: Any, wheelhouse: Path, project: image.ProjectFiles
) -> None:
    with progress.reporting(progress.Recorder()) as reported:
        again = ensure_image(
            ImageSpec(),
            engine=engine,
            base_image=built_image.plan.base_image,
            wheelhouse=wheelhouse,
            lock="cpu",
            project=project,
        )
    assert again.id == built_image.info.id
    assert not [line for line in reported.lines if line.startswith("Step ")]
    assert reported.lines == [f"image {built_image.plan.tag} is up to date; no build needed"]


def test_missing_base_image_names_the_offline_base(
    engine: Engine, wheelhouse: Path, project: image.ProjectFiles, created: Any
) -> None:
    missing = "reprobox/no-such-base:absent"
    assert not engine.image_exists(missing)
    plan = image.plan_build(
        base_image=missing, wheelhouse=wheelhouse, lock="cpu", project=project, environ={}
    )
    created.images.append(plan.tag)  # in case the engine could pull it after all
    with pytest.raises(EnvironmentProblem) as caught:
        ensure_image(
            ImageSpec(),
            engine=engine,
            base_image=missing,
            wheelhouse=wheelhouse,
            lock="cpu",
            network=False,
            project=project,
        )
    message = caught.value.message
    assert f"base image {missing} is not present and cannot be pulled here" in message
    assert "`reprobox offline-base`" in message
    assert "REPROBOX_BASE_IMAGE" in message
    assert caught.value.exit_code == 4
    assert not engine.image_exists(plan.tag)


def test_the_engine_says_where_it_keeps_images_and_the_room_there(engine: Engine) -> None:
    """The folder the engine names and the bytes df calls available there: the figure a build's floor
    is checked against."""
    storage = engine.image_storage()
    assert storage is not None, "the engine on this machine's socket named no folder it keeps images in"
    folder, free = storage
    assert str(folder) == engine.client.info()["DockerRootDir"]
    disk = os.statvfs(folder)
    assert abs(free - disk.f_bavail * disk.f_frsize) < 1 << 30  # the same disk, moments apart
