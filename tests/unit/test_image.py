"""The image as data: a byte-stable build context, a content-hash tag, labels, and the pinned files."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tarfile
from pathlib import Path

import pytest

from reprobox import image
from reprobox._version import __version__
from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.jobfile import ImageSpec
from tests.image_checkout import copy_image_files

ROOT = Path(__file__).resolve().parents[2]
DIGEST_PIN = re.compile(r"^ARG BASE_IMAGE=\S+:\S+@sha256:[0-9a-f]{64}$", re.MULTILINE)
NO_ENV: dict[str, str] = {}


@pytest.fixture
def project(tmp_path: Path) -> image.ProjectFiles:
    """A copy of this checkout's image files, free to change."""
    return copy_image_files(tmp_path / "checkout")


def plan(project: image.ProjectFiles, **kwargs: object) -> image.BuildPlan:
    kwargs.setdefault("environ", NO_ENV)
    return image.plan_build(project=project, **kwargs)  # type: ignore[arg-type]


def members(context: bytes) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(context)) as archive:
        return archive.getmembers()


def fake_wheelhouse(directory: Path, lock: Path, *, skip: str | None = None) -> Path:
    """Empty files named like the wheels a lock pins (a plan reads names and sizes, not contents)."""
    directory.mkdir(exist_ok=True)
    for name, version in image.locked_pins(lock).items():
        if name != skip:
            (directory / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"wheel")
    return directory


# -- the build context --------------------------------------------------------------------------------


def test_context_is_byte_identical_across_builds_and_mtime_changes(project: image.ProjectFiles) -> None:
    first = plan(project).context
    for path in (project.root / "reprobox").rglob("*.py"):
        os.utime(path, (1_000_000_000, 1_000_000_000))
    os.utime(project.dockerfile, None)
    second = plan(project).context
    assert first == second
    assert plan(project).context_digest == hashlib.sha256(first).hexdigest()


def test_context_members_are_sorted_and_normalized(project: image.ProjectFiles) -> None:
    script = project.root / "env" / "tool.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o700)
    (project.root / "env" / "private.txt").write_text("x")
    (project.root / "env" / "private.txt").chmod(0o600)
    infos = members(plan(project).context)
    names = [info.name for info in infos]
    assert names == sorted(names)
    assert {"Dockerfile", "pyproject.toml", "env/deterministic.env", "reprobox/image/_plan.py"} <= set(names)
    for info in infos:
        assert (info.uid, info.gid, info.uname, info.gname) == (0, 0, "", "")
        assert info.mtime == image.CONTEXT_MTIME
        assert info.isfile()
    modes = {info.name: info.mode for info in infos}
    assert modes["env/tool.sh"] == 0o755
    assert modes["env/private.txt"] == 0o644


def test_context_has_no_bytecode_or_caches(project: image.ProjectFiles) -> None:
    cache = project.root / "reprobox" / "__pycache__"
    cache.mkdir()
    (cache / "image.cpython-311.pyc").write_bytes(b"\x00")
    (project.root / "reprobox" / "stray.pyc").write_bytes(b"\x00")
    (project.root / "reprobox" / ".mypy_cache").mkdir()
    (project.root / "reprobox" / ".mypy_cache" / "x.json").write_text("{}")
    names = [info.name for info in members(plan(project).context)]
    assert not [name for name in names if name.endswith((".pyc", ".pyo")) or "__pycache__" in name]
    assert not [name for name in names if ".mypy_cache" in name]


# -- the tag --------------------------------------------------------------------------------------------


def test_tag_is_a_content_hash_and_stable(project: image.ProjectFiles) -> None:
    first, second = plan(project), plan(project)
    assert first.tag == second.tag
    assert re.fullmatch(r"reprobox/env:[0-9a-f]{16}", first.tag)
    assert first.build_digest.startswith(first.tag.rpartition(":")[2])


@pytest.mark.parametrize(
    "relative",
    [
        "env/requirements-cuda.lock",
        "Dockerfile",
        "reprobox/runtimes/base.py",
        "env/deterministic.env",
        "pyproject.toml",
    ],
)
def test_tag_changes_when_an_image_file_changes(project: image.ProjectFiles, relative: str) -> None:
    before = plan(project).tag
    path = project.root / relative
    path.write_text(path.read_text() + "\n# changed\n")
    assert plan(project).tag != before


def test_tag_changes_with_a_new_package_file_but_not_with_files_outside_the_context(
    project: image.ProjectFiles,
) -> None:
    before = plan(project).tag
    (project.root / "README.md").write_text("outside the context")
    (project.root / "tests").mkdir()
    (project.root / "tests" / "test_x.py").write_text("")
    assert plan(project).tag == before
    (project.root / "reprobox" / "extra_module.py").write_text("")
    assert plan(project).tag != before


def test_tag_changes_with_build_args(project: image.ProjectFiles) -> None:
    cuda = plan(project)
    assert cuda.buildargs["LOCK"] == "env/requirements-cuda.lock"
    assert plan(project, lock="cpu").tag != cuda.tag
    assert plan(project, base_image="example/base:1").tag != cuda.tag


def test_extra_requirements_make_a_layer_over_the_shared_image(
    project: image.ProjectFiles, tmp_path: Path
) -> None:
    extra = tmp_path / "job-requirements.lock"
    extra.write_text("tqdm==4.67.1 --hash=sha256:" + "0" * 64 + "\n")
    with_extra = plan(project, image=ImageSpec(requirements=extra))
    shared = plan(project)
    assert with_extra.shared == shared
    assert with_extra.tag.startswith(shared.tag + "-") and with_extra.tag != shared.tag
    assert with_extra.buildargs["SHARED_IMAGE"] == shared.tag
    assert "EXTRA_REQUIREMENTS" not in shared.buildargs
    assert with_extra.labels["io.reprobox.extra-requirements-digest"].startswith("sha256:")


# -- base image, lock and wheelhouse ----------------------------------------------------------------------


def test_base_image_precedence(project: image.ProjectFiles) -> None:
    assert plan(project).base_image == image.default_base_image(project)
    environ = {image.BASE_IMAGE_VARIABLE: "from/env:1"}
    assert plan(project, environ=environ).base_image == "from/env:1"
    job = ImageSpec(base="from/job:1")
    assert plan(project, environ=environ, image=job).base_image == "from/job:1"
    assert plan(project, environ=environ, image=job, base_image="from/flag:1").base_image == "from/flag:1"


def test_wheelhouse_picks_the_lock_it_covers(project: image.ProjectFiles, tmp_path: Path) -> None:
    house = fake_wheelhouse(tmp_path / "wheels", project.env_dir / "requirements-cpu.lock")
    (house / "unrelated-1.0-py3-none-any.whl").write_bytes(b"other")
    offline = plan(project, environ={image.WHEELHOUSE_VARIABLE: str(house)})
    assert offline.lock == "env/requirements-cpu.lock"
    assert offline.buildargs["WHEELHOUSE"] == image.CONTEXT_WHEELHOUSE
    assert offline.offline and offline.labels["io.reprobox.offline"] == "true"
    assert "unrelated-1.0-py3-none-any.whl" not in [w.name for w in offline.wheels]
    full = io.BytesIO()
    image.write_build_context(offline, full)
    names = [info.name for info in members(full.getvalue())]
    assert f"{image.CONTEXT_WHEELHOUSE}/{offline.wheels[0].name}" in names
    assert names == sorted(names)


def test_wheels_enter_the_tag_by_name_and_size(project: image.ProjectFiles, tmp_path: Path) -> None:
    house = fake_wheelhouse(tmp_path / "wheels", project.env_dir / "requirements-cpu.lock")
    before = plan(project, wheelhouse=house)
    (house / "unrelated-1.0-py3-none-any.whl").write_bytes(b"other")
    assert plan(project, wheelhouse=house).tag == before.tag
    numpy = next(house.glob("numpy-*.whl"))
    numpy.write_bytes(b"a different build")
    assert plan(project, wheelhouse=house).tag != before.tag


def test_missing_wheel_is_named(project: image.ProjectFiles, tmp_path: Path) -> None:
    house = fake_wheelhouse(tmp_path / "wheels", project.env_dir / "requirements-cpu.lock", skip="numpy")
    with pytest.raises(EnvironmentProblem, match=r"numpy==.*reprobox lock --base cpu --wheelhouse"):
        plan(project, wheelhouse=house, lock="cpu")
    with pytest.raises(EnvironmentProblem, match=r"lacks wheels for every lock.*numpy=="):
        plan(project, wheelhouse=house)


def test_lock_names_and_bad_locks(project: image.ProjectFiles) -> None:
    assert plan(project, lock="cpu").lock == "env/requirements-cpu.lock"
    assert plan(project, lock="env/requirements-cuda.lock").lock == "env/requirements-cuda.lock"
    assert plan(project, environ={image.LOCK_VARIABLE: "cpu"}).lock == "env/requirements-cpu.lock"
    with pytest.raises(UsageError, match="use one of cuda, cpu"):
        plan(project, lock="gpu")
    with pytest.raises(UsageError):
        plan(project, lock="pyproject.toml")


def test_missing_wheelhouse_directory_is_a_usage_error(project: image.ProjectFiles, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="reprobox lock --base cpu --wheelhouse"):
        plan(project, wheelhouse=tmp_path / "absent")


def test_installed_without_image_files_names_both_places(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "reprobox"
    package.mkdir(parents=True)
    with pytest.raises(EnvironmentProblem, match="installed without its image files") as raised:
        image.project_files(package)
    message = raised.value.message
    assert f"Dockerfile, env, pyproject.toml missing in {package.parent}" in message
    assert f"missing in {package / '_image'}" in message


def test_image_files_from_the_checkout_first_then_the_package(project: image.ProjectFiles) -> None:
    found = image.project_files(project.root / "reprobox")
    assert found == project == image.ProjectFiles.checkout(project.root)
    assert found.package_dir == project.root / "reprobox"
    bundle = project.root / "reprobox" / "_image"
    bundle.mkdir()
    for name in ("Dockerfile", "pyproject.toml", "env"):
        (project.root / name).rename(bundle / name)
    assert image.project_files(project.root / "reprobox") == image.ProjectFiles(
        bundle, project.root / "reprobox"
    )


def test_this_checkout_is_found() -> None:
    assert image.project_files() == image.ProjectFiles.checkout(ROOT)


def test_bundled_image_files_stay_out_of_the_context(project: image.ProjectFiles) -> None:
    before = plan(project).context
    bundle = project.root / "reprobox" / "_image"
    shutil.copytree(project.root / "env", bundle / "env")
    shutil.copy2(project.dockerfile, bundle / "Dockerfile")
    shutil.copy2(project.pyproject, bundle / "pyproject.toml")
    bundled = image.ProjectFiles.bundled(project.root / "reprobox")
    assert plan(bundled).context == plan(project).context == before


# -- labels and the dry-run view -------------------------------------------------------------------------


def test_labels_say_what_made_the_image(project: image.ProjectFiles) -> None:
    made = plan(project, lock="cpu", base_image="example/base:1")
    lock_digest = hashlib.sha256((project.root / "env/requirements-cpu.lock").read_bytes()).hexdigest()
    assert made.labels == {
        "io.reprobox.managed": "true",
        "io.reprobox.version": __version__,
        "io.reprobox.base": "example/base:1",
        "io.reprobox.lock": "env/requirements-cpu.lock",
        "io.reprobox.lock-digest": f"sha256:{lock_digest}",
        "io.reprobox.context-digest": f"sha256:{made.context_digest}",
        "io.reprobox.build-digest": f"sha256:{made.build_digest}",
        "io.reprobox.offline": "false",
    }


def test_render_build_plan_is_json(project: image.ProjectFiles) -> None:
    rendered = image.render_build_plan(plan(project))
    assert json.loads(json.dumps(rendered)) == rendered
    assert rendered["tag"].startswith("reprobox/env:")
    assert {
        "name": "Dockerfile",
        "source": str(project.dockerfile),
        "bytes": project.dockerfile.stat().st_size,
    } in rendered["files"]


# -- the pinned files themselves ---------------------------------------------------------------------------


def dockerfile_env_blocks(text: str) -> list[dict[str, str]]:
    """Each ENV instruction of a Dockerfile as a mapping (KEY=VALUE forms, with line continuations)."""
    blocks = []
    for instruction in re.sub(r"\\\n\s*", " ", text).splitlines():
        if instruction.startswith("ENV "):
            pairs = instruction[len("ENV ") :].split()
            blocks.append(dict(pair.split("=", 1) for pair in pairs))
    return blocks


def test_dockerfile_env_matches_deterministic_env() -> None:
    wanted = image.deterministic_env(image.ProjectFiles.checkout(ROOT))
    assert wanted["PYTHONHASHSEED"] == "0"
    assert wanted["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    blocks = dockerfile_env_blocks((ROOT / "Dockerfile").read_text())
    (block,) = [b for b in blocks if "PYTHONHASHSEED" in b]
    assert block == wanted


def test_dockerfile_pins_its_base_by_digest_and_runs_the_guest_as_non_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert DIGEST_PIN.search(text)
    assert "USER 10001:10001" in text
    assert '"reprobox.guest", "--"]' in text
    assert "--require-hashes" in text


def test_locks_pin_every_package_with_hashes() -> None:
    for name in image.LOCKS.values():
        lines = [line for line in (ROOT / name).read_text().splitlines() if not line.lstrip().startswith("#")]
        requirements = re.split(r"\n(?=[a-z0-9])", "\n".join(lines).strip())
        assert len(requirements) >= 14
        for requirement in requirements:
            assert re.match(r"^[a-z0-9][a-z0-9._-]*==\S+ \\\n", requirement), requirement
            assert "--hash=sha256:" in requirement, requirement
    cpu = image.locked_pins(ROOT / image.LOCKS["cpu"])
    cuda = image.locked_pins(ROOT / image.LOCKS["cuda"])
    assert cpu["torch"] == "2.13.0+cpu"
    assert cuda["torch"] == "2.13.0"
    assert {"numpy", "safetensors", "nvidia-ml-py", "pyyaml"} <= set(cpu) & set(cuda)
    shared = (set(cpu) & set(cuda)) - {"torch"}
    assert {name: cpu[name] for name in shared} == {name: cuda[name] for name in shared}
