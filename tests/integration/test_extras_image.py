"""A job's extra packages as one small layer over the shared image, on the real engine: what it holds, that
a rebuild gives the same layer, that ten jobs leave one shared image and ten small images and nothing
untagged, and what `reprobox clean --images` would free."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli, image, progress
from reprobox.engine import Engine, ImageInfo
from reprobox.jobfile import ImageSpec
from reprobox.runtimes.docker import ensure_image
from tests.image_checkout import in_image

pytestmark = pytest.mark.integration
OFFLINE_BASE = os.environ.get("REPROBOX_OFFLINE_BASE", "reprobox/offline-base:bookworm")  # as conftest.py
SMALL = 1_000_000  # bytes: a tiny package's layer, its bytecode included, stays well under this


def tiny_wheel(house: Path, name: str) -> Path:
    """A pure-Python wheel of one module (`import NAME; NAME.VALUE == NAME`), as a build backend writes it."""
    files = {
        f"{name}/__init__.py": f"VALUE = {name!r}\n".encode(),
        f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{name}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
        f"{len(data)}"
        for path, data in files.items()
    ]
    files[f"{name}-1.0.dist-info/RECORD"] = (
        "\n".join([*record, f"{name}-1.0.dist-info/RECORD,,"]) + "\n"
    ).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        for path, data in files.items():
            wheel.writestr(zipfile.ZipInfo(path, date_time=(2000, 1, 1, 0, 0, 0)), data)
    path = house / f"{name}-1.0-py3-none-any.whl"
    path.write_bytes(buffer.getvalue())
    return path


def tiny_job(folder: Path, *names: str) -> ImageSpec:
    """A job's own wheelhouse and hash-locked requirements holding the given tiny packages."""
    house = folder / "wheels"
    house.mkdir(parents=True)
    lines = []
    for name in names:
        digest = hashlib.sha256(tiny_wheel(house, name).read_bytes()).hexdigest()
        lines.append(f"{name}==1.0 \\\n    --hash=sha256:{digest}\n")
    lock = folder / "requirements.lock"
    lock.write_text(f"# the extras of {folder.name}\n" + "".join(lines))
    return ImageSpec(requirements=lock, wheelhouse=house)


def build(engine: Engine, spec: ImageSpec, wheelhouse: Path, project: image.ProjectFiles) -> ImageInfo:
    """The job's image as `verify` builds it: offline, over the session's shared image (reused)."""
    return ensure_image(
        spec,
        engine=engine,
        base_image=OFFLINE_BASE,
        wheelhouse=wheelhouse,
        lock="cpu",
        network=False,
        project=project,
    )


def untagged_on(engine: Engine, shared: ImageInfo) -> list[str]:
    """Untagged images with nothing built on them (what `docker images` shows as <none>) that hold every
    layer of `shared`: what a build over it left behind."""
    return [
        info.id[:19]
        for info in engine.list_images()
        if not info.tags and info.layers[: len(shared.layers)] == shared.layers
    ]


@pytest.fixture
def shared(built_image: Any) -> Any:
    """The session's shared image (built once, offline, by tests/integration/conftest.py)."""
    return built_image


def test_a_jobs_extras_are_one_small_layer_over_the_shared_image(
    shared: Any, engine: Engine, wheelhouse: Path, project: image.ProjectFiles, tmp_path: Path, created: Any
) -> None:
    spec = tiny_job(tmp_path, "tinyextra_alpha", "tinyextra_beta")
    base = shared.plan.base_image
    plan = image.plan_build(
        spec, base_image=base, lock="cpu", wheelhouse=wheelhouse, project=project, environ={}
    )
    created.images.append(plan.tag)
    with progress.reporting(progress.Recorder()) as reported:
        info = build(engine, spec, wheelhouse, project)
    assert reported.lines[0] == f"image {shared.plan.tag} is up to date; no build needed"
    assert info.tags == (plan.tag,) and plan.tag.startswith(shared.plan.tag + "-")
    assert info.layers[:-1] == shared.info.layers, "the extras image is the shared image plus one layer"
    assert 0 < info.size - shared.info.size < SMALL
    assert info.labels["io.reprobox.shared-image"] == shared.plan.tag
    assert info.labels["io.reprobox.extras"] == "tinyextra_alpha==1.0 tinyextra_beta==1.0"
    assert info.labels["io.reprobox.lock"] == shared.info.labels["io.reprobox.lock"]
    assert info.user == "10001:10001"
    assert untagged_on(engine, shared.info) == []
    facts = json.loads(
        in_image(
            info.id,
            "import json, os, importlib.util, tinyextra_alpha as a, tinyextra_beta as b\n"
            "cached = importlib.util.cache_from_source(a.__file__)\n"
            "flags = int.from_bytes(open(cached, 'rb').read()[4:8], 'little')\n"
            "print(json.dumps([a.VALUE, b.VALUE, flags, os.stat(a.__file__).st_mtime,"
            " os.access(a.__file__, os.W_OK)]))",
        )
    )
    # The bytecode is precompiled, hash-based and unchecked (flags 0b01), as the shared image's is; every
    # file of the layer has the fixed epoch as its mtime; the job user cannot change it.
    assert facts == ["tinyextra_alpha", "tinyextra_beta", 1, image.CONTEXT_MTIME, False]


def test_rebuilding_a_jobs_extras_gives_the_same_layer(
    shared: Any, engine: Engine, wheelhouse: Path, project: image.ProjectFiles, tmp_path: Path, created: Any
) -> None:
    spec = tiny_job(tmp_path, "tinyextra_again")
    first = build(engine, spec, wheelhouse, project)
    created.images.append(first.tags[0])
    engine.remove_image(first.tags[0])  # with its untagged steps: nothing is left to reuse
    assert not engine.image_exists(first.id)
    again = build(engine, spec, wheelhouse, project)
    assert again.layers == first.layers
    assert untagged_on(engine, shared.info) == []


@pytest.mark.slow
def test_ten_jobs_leave_one_shared_image_and_ten_small_images(
    shared: Any,
    engine: Engine,
    wheelhouse: Path,
    project: image.ProjectFiles,
    tmp_path: Path,
    created: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Ten jobs with different extras: ten images of one small layer each over the one shared image, no
    untagged image, and a dry run of `clean --images` that would free each one's layer."""
    before = {info.id for info in engine.list_images()}
    started = time.monotonic()
    built = []
    for index in range(10):
        spec = tiny_job(tmp_path / f"job{index}", f"tinyextra_{index}")
        info = build(engine, spec, wheelhouse, project)
        created.images.append(info.tags[0])
        built.append(info)
    seconds = time.monotonic() - started
    added = [info for info in engine.list_images() if info.id not in before]
    assert sorted(info.id for info in added) == sorted(info.id for info in built), "only the ten images"
    assert len({info.tags[0] for info in built}) == 10
    for info in built:
        assert info.layers[:-1] == shared.info.layers
        assert info.size - shared.info.size < SMALL
    assert untagged_on(engine, shared.info) == []
    assert seconds < 10 * 60, f"ten tiny extras took {seconds:.0f} s"

    capsys.readouterr()
    code = cli.main(["clean", "--images", "--dry-run", "--runs-dir", str(tmp_path / "runs"), "--json", "-q"])
    assert code == 0
    items = json.loads(capsys.readouterr().out)["images"]
    order = [item["id"] for item in items]
    frees = {item["id"]: item["frees"] for item in items}
    assert all(not item["removed"] for item in items)
    for info in built:  # each frees exactly its own layer: the shared image's stay
        assert frees[info.id] == info.size - shared.info.size
    if shared.info.id in order:  # listed after every image built on it, so removing in order can work
        assert order.index(shared.info.id) > max(order.index(info.id) for info in built)
    assert all(engine.image_exists(info.id) for info in built)
