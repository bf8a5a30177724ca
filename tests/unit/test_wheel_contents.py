"""The wheel and the sdist the build backend makes: they carry the image files, and an unpacked wheel
gives the same build context, byte for byte, and so the same image tag, as this checkout."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from reprobox import image
from reprobox._version import __version__

ROOT = Path(__file__).resolve().parents[2]
PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation")
IMAGE_FILES = ("Dockerfile", "pyproject.toml", "env/deterministic.env", "env/requirements-cpu.lock")

pytest.importorskip("hatchling", reason="the build backend is in the dev extra: pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([*PIP_WHEEL, "-w", out, ROOT], check=True, capture_output=True)
    (built,) = out.glob("reprobox-*.whl")
    return built


@pytest.fixture(scope="module")
def unpacked(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel as pip lays it out in site-packages (a zip, with the modes it records)."""
    site = tmp_path_factory.mktemp("site-packages")
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            path = Path(archive.extract(info, site))
            if mode := info.external_attr >> 16 & 0o777:
                path.chmod(mode)
    return site


def test_wheel_carries_the_image_files_and_package_data(unpacked: Path) -> None:
    bundle = unpacked / "reprobox" / "_image"
    for name in IMAGE_FILES:
        assert (bundle / name).read_bytes() == (ROOT / name).read_bytes(), name
    assert sorted(p.name for p in (bundle / "env").iterdir()) == sorted(
        p.name for p in (ROOT / "env").iterdir()
    )
    assert (unpacked / "reprobox" / "py.typed").is_file()
    schema = unpacked / "reprobox" / "attest" / "schemas" / "predicate-v1.schema.json"
    assert schema.read_bytes() == (ROOT / "reprobox" / "attest" / "schemas" / schema.name).read_bytes()
    boot = sorted(p.name for p in (ROOT / "reprobox" / "guest" / "_boot").glob("*.py"))
    assert boot and sorted(p.name for p in (unpacked / "reprobox" / "guest" / "_boot").glob("*.py")) == boot


def test_wheel_metadata_keeps_version_extras_and_script(unpacked: Path) -> None:
    (info,) = unpacked.glob("reprobox-*.dist-info")
    metadata = (info / "METADATA").read_text()
    assert f"\nVersion: {__version__}\n" in metadata
    for extra in ("torch", "report", "dev", "examples", "signing"):
        assert f"\nProvides-Extra: {extra}\n" in metadata
    assert "reprobox = reprobox.cli:command" in (info / "entry_points.txt").read_text()


def test_installed_package_finds_its_bundled_image_files(unpacked: Path) -> None:
    found = image.project_files(unpacked / "reprobox")
    assert found == image.ProjectFiles.bundled(unpacked / "reprobox")
    assert found.root == unpacked / "reprobox" / "_image"


def plan(project: image.ProjectFiles) -> image.BuildPlan:
    return image.plan_build(project=project, base_image="example/base:1", lock="cpu", environ={})


def test_wheel_and_checkout_give_the_same_context_and_tag(unpacked: Path) -> None:
    from_wheel = plan(image.project_files(unpacked / "reprobox"))
    from_checkout = plan(image.ProjectFiles.checkout(ROOT))
    with tarfile.open(fileobj=io.BytesIO(from_wheel.context)) as archive:
        names = archive.getnames()
    assert {"Dockerfile", "pyproject.toml", "env/deterministic.env", "reprobox/__init__.py"} <= set(names)
    assert not [name for name in names if name.startswith("reprobox/_image")]
    assert from_wheel.context == from_checkout.context
    assert from_wheel.tag == from_checkout.tag


def test_sdist_carries_the_image_files_and_the_build_hook(tmp_path: Path) -> None:
    built = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, hatchling.build as b; print(b.build_sdist(sys.argv[1]))",
            tmp_path,
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    with tarfile.open(tmp_path / built.stdout.strip()) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {*IMAGE_FILES, "hatch_build.py", "reprobox/__init__.py", "reprobox/py.typed"} <= names
