"""An offline build the engine's disk cannot hold is refused before it starts (exit 4, one sentence naming
the need, the free bytes and the folder), and the floor it is refused below comes from the wheels' own
zip directories."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from reprobox import image
from reprobox.engine import ImageInfo
from reprobox.errors import EXIT_ENVIRONMENT, NotEnoughSpace
from reprobox.image._context import ContextFile
from reprobox.jobfile import ImageSpec
from reprobox.runtimes.docker import ensure_image
from tests.image_checkout import copy_image_files
from tests.unit.test_image_wheelhouse import wheels_for


def a_wheel(path: Path, members: dict[str, bytes]) -> ContextFile:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return ContextFile(name=f"wheelhouse/{path.name}", source=path)


def test_the_floor_is_each_wheel_and_its_unpacked_contents_twice(tmp_path: Path) -> None:
    torch_like = a_wheel(
        tmp_path / "big-1.0-py3-none-any.whl", {"big/lib.so": bytes(1 << 20), "big/a.py": b"x" * 10}
    )
    small = a_wheel(tmp_path / "small-1.0-py3-none-any.whl", {"small.py": b"y" * 100})
    floor = image.build_space_floor([torch_like, small])
    assert floor == 2 * (torch_like.size + (1 << 20) + 10) + 2 * (small.size + 100)
    assert torch_like.size < 10_000  # zeros deflate well: the contents, not the file, make the floor


def test_a_wheel_that_is_no_zip_counts_its_own_size(tmp_path: Path) -> None:
    broken = tmp_path / "broken-1.0-py3-none-any.whl"
    broken.write_bytes(b"not a zip at all")
    assert image.build_space_floor([ContextFile(name="wheelhouse/broken", source=broken)]) == 4 * 16


class SmallDiskEngine:
    """An engine that has no image yet and reports `free` bytes where it keeps images."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.builds: list[str] = []

    def image_exists(self, ref: str) -> bool:
        return False

    def image_storage(self) -> tuple[Path, int]:
        return Path("/var/lib/engine"), self.free

    def build(self, context: Any, tag: str, *args: Any, **kwargs: Any) -> ImageInfo:
        self.builds.append(tag)
        return ImageInfo(id="sha256:" + "0" * 64, tags=(tag,))


@pytest.fixture
def offline_build(tmp_path: Path) -> dict[str, Any]:
    project = copy_image_files(tmp_path / "checkout")
    wheelhouse = wheels_for(tmp_path / "wheels", project.root / image.LOCKS["cpu"])
    return {
        "base_image": "reprobox/offline-base:bookworm",
        "wheelhouse": wheelhouse,
        "lock": "cpu",
        "project": project,
    }


def test_a_build_the_disk_cannot_hold_is_refused_before_it_starts(offline_build: dict[str, Any]) -> None:
    plan = image.plan_build(environ={}, **offline_build)
    floor = image.build_space_floor(plan.wheels)
    engine = SmallDiskEngine(free=floor - 1)
    with pytest.raises(NotEnoughSpace) as refused:
        ensure_image(ImageSpec(), engine=engine, network=False, **offline_build)  # type: ignore[arg-type]
    assert engine.builds == []
    assert refused.value.exit_code == EXIT_ENVIRONMENT
    assert refused.value.needed == floor
    message = refused.value.message
    assert f"building image {plan.tag} needs at least" in message
    assert "/var/lib/engine" in message and "reprobox clean --images" in message


def test_a_build_the_disk_can_hold_goes_ahead(offline_build: dict[str, Any]) -> None:
    plan = image.plan_build(environ={}, **offline_build)
    engine = SmallDiskEngine(free=image.build_space_floor(plan.wheels))
    info = ensure_image(ImageSpec(), engine=engine, network=False, **offline_build)  # type: ignore[arg-type]
    assert engine.builds == [plan.tag] and info.tags == (plan.tag,)
