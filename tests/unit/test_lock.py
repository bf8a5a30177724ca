"""`reprobox lock`: requirements read and refused, the lock text, and real pip resolutions and wheelhouse
fills against tiny wheels in a temporary folder (`--no-index --find-links`), so no network is needed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from reprobox import cli, image, locking
from reprobox.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EnvironmentProblem, UsageError
from reprobox.locking import _resolve as resolve_module
from reprobox.locking._sources import parse_pip_config
from reprobox.locking._uv import wheel_rank
from tests.offline_messages import assert_names_the_offline_path

ROOT = Path(__file__).resolve().parents[2]


# -- helpers ----------------------------------------------------------------------------------------------


def make_wheel(folder: Path, name: str, version: str, *requires: str, tag: str = "py3-none-any") -> Path:
    """A wheel pip accepts: a zip with the package, METADATA, WHEEL and RECORD."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {requirement}\n" for requirement in requires),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{member},,\n" for member in [*files, f"{info}/RECORD"])
    path = folder / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def base_lock_file(path: Path, wheels: Path, *pins: str) -> Path:
    """An image lock pinning `name==version` entries, hashed with the wheels of `wheels`."""
    lines = ["# the image's own lock"]
    for pin in pins:
        name, version = pin.split("==")
        digest = sha256(next(wheels.glob(f"{name}-{version}-*.whl")))
        lines += [f"{pin} \\", f"    --hash=sha256:{digest}", "    # via test"]
    return write(path, "\n".join(lines) + "\n")


@pytest.fixture(autouse=True)
def isolated_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip reads no configuration of this machine (its find-links, index, constraints), nor reprobox's."""
    for name in list(os.environ):
        if name.startswith("PIP_") or name in (image.LOCK_VARIABLE, image.WHEELHOUSE_VARIABLE):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    """tinya needs tinyb>=1; tinyc needs tinyb<2; tinyb comes as 1.0 and 2.0; tinyw is Windows only."""
    folder = tmp_path / "wheels"
    make_wheel(folder, "tinya", "1.0", "tinyb>=1")
    make_wheel(folder, "tinyb", "1.0")
    make_wheel(folder, "tinyb", "2.0")
    make_wheel(folder, "tinyc", "1.0", "tinyb<2")
    make_wheel(folder, "tinyw", "1.0", tag="cp311-cp311-win_amd64")
    return folder


def offline(wheels: Path) -> locking.Target:
    return locking.Target(find_links=(str(wheels),), no_index=True)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["lock", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path


# -- requirements read ------------------------------------------------------------------------------------


def test_a_requirements_file_gives_names_versions_markers_and_includes(tmp_path: Path) -> None:
    write(tmp_path / "shared" / "common.in", "# shared\nrich>=13\n")
    write(tmp_path / "shared" / "pins.txt", "tqdm<5\n")
    source = write(
        tmp_path / "requirements.in",
        "# what the job adds\n"
        "transformers[torch]>=4.40  # the trainer\n"
        "\n"
        "tqdm==4.66.0 \\\n"
        "    --hash=sha256:" + "ab" * 32 + "\n"
        "pywin32; sys_platform == 'win32'\n"
        "-r shared/common.in\n"
        "--constraint=shared/pins.txt\n",
    )
    found = locking.read_requirements(source)
    assert [(item.text, item.origin) for item in found.requirements] == [
        ("transformers[torch]>=4.40", f"{source}:2"),
        ("tqdm==4.66.0", f"{source}:4"),
        ("pywin32; sys_platform == 'win32'", f"{source}:6"),
        ("rich>=13", f"{tmp_path / 'shared' / 'common.in'}:2"),
    ]
    assert [item.text for item in found.constraints] == ["tqdm<5"]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("-e ./mypkg", "editable install"),
        ("--editable=git+https://example.org/a.git", "editable install"),
        ("git+https://example.org/mypkg.git@v1", "VCS requirement"),
        ("mypkg @ git+https://example.org/mypkg.git", "VCS requirement"),
        ("mypkg @ https://example.org/mypkg-1.0-py3-none-any.whl", "URL or direct reference"),
        ("https://example.org/mypkg-1.0.tar.gz", "URL or direct reference"),
        ("./vendor/mypkg", "local path"),
        ("dist/mypkg-1.0-py3-none-any.whl", "local path"),
        ("--index-url https://example.org/simple", "option --index-url"),
        ("mypkg==1.0 --config-settings=x=y", "option --config-settings"),
        ("%%%", "is not a requirement"),
    ],
)
def test_what_cannot_be_hash_locked_is_refused(tmp_path: Path, line: str, says: str) -> None:
    source = write(tmp_path / "requirements.in", f"numpy\n{line}\n")
    with pytest.raises(UsageError) as caught:
        locking.read_requirements(source)
    assert caught.value.message.startswith(f"{source}:2: ")
    assert says in caught.value.message
    assert caught.value.exit_code == EXIT_BAD_INPUT


def test_includes_that_are_missing_or_circular_are_refused(tmp_path: Path) -> None:
    missing = write(tmp_path / "a.in", "-r nowhere.in\n")
    with pytest.raises(UsageError, match=r"a\.in:1: included file .*nowhere\.in does not exist"):
        locking.read_requirements(missing)
    write(tmp_path / "b.in", "rich\n-r c.in\n")
    write(tmp_path / "c.in", "-r b.in\n")
    with pytest.raises(UsageError, match=r"c\.in:1: -r b\.in includes a file that includes it"):
        locking.read_requirements(tmp_path / "b.in")


def test_an_input_that_is_missing_unreadable_or_empty_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        UsageError, match=r"REQUIREMENTS .*nothere\.in does not exist; pass a requirements\.in"
    ):
        locking.read_requirements(tmp_path / "nothere.in")
    with pytest.raises(UsageError, match="is a directory"):
        locking.read_requirements(tmp_path)
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UsageError, match="cannot be read"):
        locking.read_requirements(binary)
    with pytest.raises(UsageError, match="lists no requirements"):
        locking.read_requirements(write(tmp_path / "empty.in", "# nothing yet\n\n"))


def test_a_pyproject_gives_its_project_dependencies(tmp_path: Path) -> None:
    source = write(
        tmp_path / "pyproject.toml",
        '[project]\nname = "mytrainer"\nversion = "0.1"\ndependencies = [\n'
        '    "transformers>=4.40",\n    "rich; python_version >= \'3.10\'",\n]\n',
    )
    found = locking.read_requirements(source)
    assert [(item.text, item.origin) for item in found.requirements] == [
        ("transformers>=4.40", f"{source}:5"),
        ("rich; python_version >= '3.10'", f"{source}:6"),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[project]\nname = "x"\n', "has no [project] dependencies, so there is nothing to lock"),
        ('[project]\nname = "x"\ndependencies = []\n', "has no [project] dependencies"),
        ('[project]\nname = "x"\ndynamic = ["dependencies"]\n', "dependencies are dynamic"),
        ("[tool.black]\nline-length = 100\n", "has no [project] table"),
        ("[project\n", "is not valid TOML"),
        ('[project]\ndependencies = ["mypkg @ git+https://example.org/m.git"]\n', "VCS requirement"),
    ],
)
def test_a_pyproject_without_lockable_dependencies_is_refused(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(UsageError) as caught:
        locking.read_requirements(write(tmp_path / "pyproject.toml", text))
    assert says in caught.value.message


# -- the image's lock and the lock text ------------------------------------------------------------------


def test_the_base_is_named_a_file_or_the_lock_a_build_takes(tmp_path: Path, wheels: Path) -> None:
    cpu = locking.base_lock("cpu", {})
    assert (cpu.name, cpu.shown(), cpu.argument) == ("cpu", image.LOCKS["cpu"], "cpu")
    assert cpu.pins["torch"].startswith("2.13.0")
    assert locking.base_lock(None, {}).name == "cuda"  # as a build with no lock and no wheelhouse
    assert locking.base_lock(None, {image.LOCK_VARIABLE: "cpu"}).name == "cpu"
    cpu_wheels = tmp_path / "cpu-wheels"
    cpu_wheels.mkdir()
    for name, version in image.locked_pins(cpu.path).items():
        (cpu_wheels / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"wheel")
    assert locking.base_lock(None, {image.WHEELHOUSE_VARIABLE: str(cpu_wheels)}).name == "cpu"
    own = locking.base_lock(str(base_lock_file(tmp_path / "own.lock", wheels, "tinyb==1.0")), {})
    assert (own.name, dict(own.pins)) == (None, {"tinyb": "1.0"})
    with pytest.raises(UsageError, match="--base gpu is neither one of the image's locks"):
        locking.base_lock("gpu", {})
    with pytest.raises(UsageError, match="pins no package"):
        locking.base_lock(str(write(tmp_path / "empty.lock", "# nothing\n")), {})
    with pytest.raises(UsageError, match=r"holds no image lock whole.*pass --base cpu"):
        locking.base_lock(None, {image.WHEELHOUSE_VARIABLE: str(wheels)})


def test_the_lock_text_pins_each_wheel_and_says_how_to_make_it_again() -> None:
    resolution = locking.Resolution(
        packages=(
            locking.LockedPackage("accelerate", "1.15.0", "accelerate-1.15.0-py3-none-any.whl", "a" * 64),
            locking.LockedPackage("tqdm", "4.70.1", "tqdm-4.70.1-py3-none-any.whl", "b" * 64),
        ),
        left_out=(locking.LockedPackage("torch", "2.13.0+cpu", "torch.whl", "c" * 64),),
    )
    options = locking.LockOptions(requirements=Path("req.in"), output=Path("my lock.txt"), base="cpu")
    command = locking.regenerate_command(options, locking.base_lock("cpu", {}))
    assert command == "reprobox lock req.in -o 'my lock.txt' --base cpu"
    text = locking.lock_text(
        resolution,
        source="req.in",
        base="env/requirements-cpu.lock",
        target=locking.Target(),
        command=command,
    )
    assert text == (
        "# Hash-locked extra requirements from req.in, installed on top of the image's "
        "env/requirements-cpu.lock\n"
        "# (whose pins it leaves out), for CPython 3.11, manylinux x86_64. Regenerate with:\n"
        "#   reprobox lock req.in -o 'my lock.txt' --base cpu\n"
        "accelerate==1.15.0 \\\n"
        f"    --hash=sha256:{'a' * 64}\n"
        "    # accelerate-1.15.0-py3-none-any.whl\n"
        "tqdm==4.70.1 \\\n"
        f"    --hash=sha256:{'b' * 64}\n"
        "    # tqdm-4.70.1-py3-none-any.whl\n"
    )
    empty = locking.lock_text(
        locking.Resolution((), ()), source="r", base="b", target=locking.Target(), command="c"
    )
    assert "nothing to add" in empty
    assert not [line for line in empty.splitlines() if not line.startswith("#")]


def test_the_target_is_the_images_python_on_manylinux() -> None:
    flags = locking.Target(python_version="3.12").wheel_flags()
    assert flags[:5] == ["--only-binary=:all:", "--implementation", "cp", "--python-version", "3.12"]
    assert {
        "cp312",
        "abi3",
        "none",
        "manylinux_2_28_x86_64",
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
    } <= set(flags)
    assert "manylinux_2_29_x86_64" not in flags
    with pytest.raises(UsageError, match="--python-version '311' is not a CPython 3 version"):
        locking.check_python_version("311")


# -- real resolutions (pip, offline) --------------------------------------------------------------------


def test_a_dependency_the_image_pins_is_left_out(tmp_path: Path, wheels: Path) -> None:
    base = locking.base_lock(str(base_lock_file(tmp_path / "base.lock", wheels, "tinyb==1.0")), {})
    wanted = locking.read_requirements(write(tmp_path / "requirements.in", "tinya\n"))
    resolution = locking.resolve(wanted, base, offline(wheels))
    assert [(p.name, p.version) for p in resolution.packages] == [("tinya", "1.0")]
    assert resolution.packages[0].sha256 == sha256(wheels / "tinya-1.0-py3-none-any.whl")
    assert resolution.packages[0].wheel == "tinya-1.0-py3-none-any.whl"
    assert [(p.name, p.version) for p in resolution.left_out] == [("tinyb", "1.0")]  # not the newer 2.0


def test_uv_resolves_as_pip_does_and_reads_pips_configuration(
    tmp_path: Path, wheels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv resolves alone (pip is never asked) to the lock pip's resolver gives, with the find-links and
    no-index of pip's own configuration (its variables here), not given on the command line."""
    pytest.importorskip("uv")
    make_wheel(wheels, "tinyx", "1.0", tag="cp311-abi3-manylinux2014_x86_64")  # a platform wheel
    base = locking.base_lock(str(base_lock_file(tmp_path / "base.lock", wheels, "tinyb==1.0")), {})
    wanted = locking.read_requirements(write(tmp_path / "requirements.in", "tinya\ntinyx\n"))
    by_pip = _resolve_with_pip_only(monkeypatch, wanted, base, offline(wheels))
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")

    def no_pip(*_args: object) -> None:
        raise AssertionError("pip resolved")

    monkeypatch.setattr(resolve_module, "run_pip", no_pip)
    by_uv = locking.resolve(wanted, base, locking.Target())
    assert by_uv == by_pip
    assert [p.wheel for p in by_uv.packages] == [
        "tinya-1.0-py3-none-any.whl",
        "tinyx-1.0-cp311-abi3-manylinux2014_x86_64.whl",
    ]


def _resolve_with_pip_only(
    monkeypatch: pytest.MonkeyPatch,
    wanted: locking.RequirementSet,
    base: locking.BaseLock,
    target: locking.Target,
) -> locking.Resolution:
    with monkeypatch.context() as patch:
        patch.setattr(resolve_module, "uv_binary", lambda: None)
        return locking.resolve(wanted, base, target)


def test_the_wheel_pinned_is_the_one_pip_prefers_for_the_image() -> None:
    target = locking.Target()
    ranked = sorted(
        [
            "p-1-py3-none-any.whl",
            "p-1-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
            "p-1-cp311-cp311-manylinux_2_28_x86_64.whl",
            "p-1-cp38-abi3-manylinux_2_28_x86_64.whl",
        ],
        key=lambda name: wheel_rank(name, target) or (99, 99, 99),
    )
    assert ranked[:2] == [
        "p-1-cp311-cp311-manylinux_2_28_x86_64.whl",
        "p-1-cp38-abi3-manylinux_2_28_x86_64.whl",
    ]
    assert ranked[-1] == "p-1-py3-none-any.whl"
    for foreign in ("p-1-cp312-cp312-manylinux_2_28_x86_64.whl", "p-1-cp311-cp311-win_amd64.whl"):
        assert wheel_rank(foreign, target) is None


def test_pips_configuration_is_read_as_pip_reads_it() -> None:
    settings = parse_pip_config(
        "global.extra-index-url='file:///a/simple file:///b/simple'\n"
        "global.find-links='/opt/wheels'\n"
        "global.constraint='/etc/pip/constraints.txt'\n"
        "global.cert='/etc/ssl/cert.pem'\n"
        ":env:.find-links='/srv/wheels'\n"
        ":env:.no-index='true'\n"
    )
    assert settings.flags() == [
        "--no-index",
        *("--extra-index-url", "file:///a/simple", "--extra-index-url", "file:///b/simple"),
        *("--find-links", "/srv/wheels", "--constraint", "/etc/pip/constraints.txt"),
    ]


def test_a_dependency_the_image_does_not_pin_is_locked_too(tmp_path: Path, wheels: Path) -> None:
    make_wheel(wheels, "other", "1.0")
    base = locking.base_lock(str(base_lock_file(tmp_path / "base.lock", wheels, "other==1.0")), {})
    wanted = locking.read_requirements(write(tmp_path / "requirements.in", "tinya\n"))
    resolution = locking.resolve(wanted, base, offline(wheels))
    assert [(p.name, p.version) for p in resolution.packages] == [("tinya", "1.0"), ("tinyb", "2.0")]
    assert resolution.packages[1].sha256 == sha256(wheels / "tinyb-2.0-py3-none-any.whl")
    assert resolution.left_out == ()


def test_a_conflict_with_the_images_pins_names_the_package_and_both_versions(
    tmp_path: Path, wheels: Path
) -> None:
    base = locking.base_lock(str(base_lock_file(tmp_path / "base.lock", wheels, "tinyb==2.0")), {})
    wanted = locking.read_requirements(write(tmp_path / "requirements.in", "tinyc\n"))
    with pytest.raises(UsageError) as caught:
        locking.resolve(wanted, base, offline(wheels))
    message = caught.value.message
    assert message.startswith("tinyc 1.0 needs tinyb<2, but the image's lock ")
    assert "pins tinyb==2.0, which the image installs" in message


def test_a_package_with_no_wheel_for_the_image_is_named_with_the_platform(
    tmp_path: Path, wheels: Path
) -> None:
    base = locking.base_lock(str(base_lock_file(tmp_path / "base.lock", wheels, "tinyb==1.0")), {})
    source = write(tmp_path / "requirements.in", "tinyw\n")
    with pytest.raises(UsageError) as caught:
        locking.resolve(locking.read_requirements(source), base, offline(wheels))
    assert caught.value.message.startswith(
        f"{source}:1: tinyw has no wheel for CPython 3.11, manylinux x86_64 "
        "(pip found only tinyw-1.0-cp311-cp311-win_amd64.whl)"
    )
    # A version the image pins with no wheel here (torch's CPU build off PyPI): pip calls it a conflict.
    make_wheel(wheels, "tinyd", "1.0", "tinyw")
    pinned = locking.base_lock(str(base_lock_file(tmp_path / "pinned.lock", wheels, "tinyw==1.0")), {})
    source = write(tmp_path / "requirements.in", "tinyd\n")
    with pytest.raises(UsageError) as caught:
        locking.resolve(locking.read_requirements(source), pinned, offline(wheels))
    assert caught.value.message.startswith("tinyd 1.0 needs tinyw, and tinyw==1.0, which the image's lock ")
    assert (
        "has no wheel for CPython 3.11, manylinux x86_64 in the --find-links folders" in caught.value.message
    )


def test_no_network_is_an_environment_problem(
    tmp_path: Path, wheels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # the discard port: refused at once
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")  # uv's own retries back off for about 9 s before failing
    base = locking.base_lock(str(base_lock_file(tmp_path / "base.lock", wheels, "tinyb==1.0")), {})
    wanted = locking.read_requirements(write(tmp_path / "requirements.in", "tinya\n"))
    with pytest.raises(EnvironmentProblem) as caught:
        locking.resolve(wanted, base, locking.Target())
    assert caught.value.exit_code == EXIT_ENVIRONMENT
    assert "pip could not reach the package index (http://127.0.0.1:9/simple/tinya/" in caught.value.message
    assert "run it on a connected machine, with --wheelhouse DIR" in caught.value.message


UNREACHABLE = "http://127.0.0.1:9/simple"  # the discard port: refused at once


def no_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither uv nor pip may run: what follows must be decided before either is asked."""

    def refuse(*_args: object) -> None:
        raise AssertionError("a resolver ran")

    monkeypatch.setattr(resolve_module, "run_pip", refuse)
    monkeypatch.setattr(resolve_module, "uv_binary", refuse)


def test_no_index_answering_is_said_at_once(
    in_tmp: Path, wheels: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", UNREACHABLE)
    base_lock_file(in_tmp / "base.lock", wheels, "tinyb==1.0")
    write(in_tmp / "requirements.in", "tinya\n")
    no_resolver(monkeypatch)
    started = time.monotonic()
    code, out, err = run_cli(capsys, "requirements.in", "-o", "requirements.lock", "--base", "base.lock")
    assert (
        time.monotonic() - started < 30
    )  # pip's and uv's retries took 9 s and more; a busy machine's margin
    assert code == EXIT_ENVIRONMENT and not out
    assert err == (
        "error: no package index answers (127.0.0.1:9: connection refused), so nothing can be locked or "
        "fetched here; run reprobox lock where the index answers, or give it a wheelhouse that holds the "
        "wheels (REPROBOX_WHEELHOUSE or --wheelhouse DIR, filled by `reprobox lock --wheelhouse DIR` where "
        "the index answers), or pass --no-index --find-links DIR\n"
    )
    assert not (in_tmp / "requirements.lock").exists()
    # a proxy, where one is set, is what a connection opens: it is the one asked
    answered, why = locking.any_answers(["https://pypi.org/simple"], proxy="http://127.0.0.1:9")
    assert (answered, why) == (False, ["127.0.0.1:9: connection refused"])
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    assert locking.any_answers(["https://pypi.org/simple"]) == (False, ["127.0.0.1:9: connection refused"])


def test_with_no_index_a_wheelhouse_locks_and_fills_offline(
    in_tmp: Path, wheels: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", UNREACHABLE)
    monkeypatch.setenv("PIP_RETRIES", "0")  # were the index asked after all, fail fast rather than pass
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    house = in_tmp / "house"
    house.mkdir()
    for wheel in wheels.glob("tiny[ab]-*.whl"):
        shutil.copy2(wheel, house / wheel.name)
    monkeypatch.setenv(image.WHEELHOUSE_VARIABLE, str(house))
    base_lock_file(in_tmp / "base.lock", wheels, "tinyb==1.0")
    write(in_tmp / "requirements.in", "tinya\n")
    code, out, err = run_cli(capsys, "requirements.in", "-o", "requirements.lock", "--base", "base.lock")
    assert code == 0, err
    assert (
        f"reprobox: no package index answers (127.0.0.1:9: connection refused): locking from the wheelhouse "
        f"{house}, offline\n"
    ) in err
    assert "tinya==1.0 \\\n" in (in_tmp / "requirements.lock").read_text()
    assert f"wheelhouse {house} holds every wheel of requirements.lock (1 wheel," in out
    # the image's lock and a lock already written, from the same wheelhouse, still offline
    code, out, err = run_cli(capsys, "--base", "base.lock", "--image-lock", "--locked", "requirements.lock")
    assert code == 0, err
    assert f"wheelhouse {house} holds every wheel of base.lock, requirements.lock (2 wheels," in out
    assert sorted(path.name for path in house.iterdir()) == sorted(
        path.name for path in wheels.glob("tiny[ab]-*")
    )


# -- wheelhouses ----------------------------------------------------------------------------------------


def test_a_wheelhouse_is_filled_hash_checked_and_checked_offline(tmp_path: Path, wheels: Path) -> None:
    lock = base_lock_file(tmp_path / "job.lock", wheels, "tinya==1.0", "tinyb==2.0")
    house = locking.fill_wheelhouse([lock], tmp_path / "house", offline(wheels))
    assert [wheel.name for wheel in house.wheels] == [
        "tinya-1.0-py3-none-any.whl",
        "tinyb-2.0-py3-none-any.whl",
    ]
    assert sorted(path.name for path in (tmp_path / "house").iterdir()) == [w.name for w in house.wheels]
    (tmp_path / "house" / "tinyb-2.0-py3-none-any.whl").unlink()
    with pytest.raises(EnvironmentProblem) as caught:
        locking.check_wheelhouse([lock], tmp_path / "house")
    assert f"has no wheel for tinyb==2.0 ({lock}:5)" in caught.value.message
    assert caught.value.exit_code == EXIT_ENVIRONMENT
    house = tmp_path / "house"
    assert_names_the_offline_path(
        caught.value.message, f"reprobox lock --wheelhouse {house} --locked {lock}", house
    )


def test_a_wheel_whose_hash_the_lock_does_not_list_is_refused(tmp_path: Path, wheels: Path) -> None:
    lock = write(tmp_path / "job.lock", f"tinyb==2.0 \\\n    --hash=sha256:{'0' * 64}\n")
    with pytest.raises(
        EnvironmentProblem, match=r"tinyb==2\.0 \(.*job\.lock:1\) does not match the lock's sha256"
    ):
        locking.fill_wheelhouse([lock], tmp_path / "house", offline(wheels))
    unhashed = write(tmp_path / "loose.lock", "tinyb==2.0\n")
    with pytest.raises(UsageError, match=r"loose\.lock:1: 'tinyb' is not pinned as `name==version --hash"):
        locking.fill_wheelhouse([unhashed], tmp_path / "house", offline(wheels))


# -- the command ----------------------------------------------------------------------------------------


def test_lock_and_fill_from_the_command_line(
    in_tmp: Path, wheels: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base_lock_file(in_tmp / "base.lock", wheels, "tinyb==1.0")
    write(in_tmp / "requirements.in", "tinya\n")
    offline_flags = ["--no-index", "--find-links", "wheels", "--base", "base.lock"]
    code, out, err = run_cli(
        capsys,
        "requirements.in",
        "-o",
        "requirements.lock",
        "--wheelhouse",
        "house",
        *offline_flags,
        "--json",
    )
    assert code == 0, err
    if resolve_module.uv_binary() is not None:  # uv reads the relative --find-links as pip does
        assert "reprobox: resolved 2 packages with uv in " in err
    data = json.loads(out)
    assert data["lock"] == "requirements.lock"
    assert data["packages"] == [
        {
            "name": "tinya",
            "version": "1.0",
            "wheel": "tinya-1.0-py3-none-any.whl",
            "sha256": sha256(wheels / "tinya-1.0-py3-none-any.whl"),
        }
    ]
    assert data["left_out"] == [{"name": "tinyb", "version": "1.0"}]
    assert data["wheelhouse"]["path"] == "house"
    assert [wheel["name"] for wheel in data["wheelhouse"]["wheels"]] == ["tinya-1.0-py3-none-any.whl"]
    text = (in_tmp / "requirements.lock").read_text()
    assert "#   reprobox lock requirements.in -o requirements.lock --base base.lock --no-index " in text
    assert image.check_extra_lock(in_tmp / "requirements.lock", in_tmp / "base.lock")  # the build accepts it
    locking.check_wheelhouse([in_tmp / "requirements.lock"], in_tmp / "house")

    # The image's own lock, then a lock already written, into another wheelhouse.
    code, out, err = run_cli(capsys, "--wheelhouse", "image-house", *offline_flags)
    assert code == 0, err
    assert "wheelhouse image-house holds every wheel of base.lock (1 wheel," in out
    assert [path.name for path in (in_tmp / "image-house").iterdir()] == ["tinyb-1.0-py3-none-any.whl"]
    code, out, err = run_cli(
        capsys,
        "--wheelhouse",
        "image-house",
        "--locked",
        "requirements.lock",
        "--no-index",
        "--find-links",
        "wheels",
    )
    assert code == 0, err
    assert sorted(path.name for path in (in_tmp / "image-house").iterdir()) == [
        "tinya-1.0-py3-none-any.whl",
        "tinyb-1.0-py3-none-any.whl",
    ]


def test_a_lock_fills_the_wheelhouse_builds_read_as_init_does(
    in_tmp: Path, wheels: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With $REPROBOX_WHEELHOUSE set, `reprobox lock` puts the new lock's wheels there, as init does
    (both take it from `locking.shared_wheelhouse`), so the build that follows finds them offline."""
    shared = in_tmp / "shared"
    monkeypatch.setenv(image.WHEELHOUSE_VARIABLE, str(shared))
    assert locking.shared_wheelhouse(os.environ) == shared
    assert locking.shared_wheelhouse({image.WHEELHOUSE_VARIABLE: " "}) is None
    base_lock_file(in_tmp / "base.lock", wheels, "tinyb==1.0")
    write(in_tmp / "requirements.in", "tinya\n")
    flags = ["--no-index", "--find-links", "wheels", "--base", "base.lock"]
    code, out, err = run_cli(capsys, "requirements.in", "-o", "requirements.lock", *flags)
    assert code == 0, err
    assert f"wheelhouse {shared} holds every wheel of requirements.lock (1 wheel," in out
    assert [path.name for path in shared.iterdir()] == ["tinya-1.0-py3-none-any.whl"]
    locking.check_wheelhouse([in_tmp / "requirements.lock"], shared)
    # --wheelhouse still names another; a variable that names a file is refused by its name
    code, out, err = run_cli(
        capsys, "requirements.in", "-o", "requirements.lock", "--wheelhouse", "own", *flags
    )
    assert code == 0, err
    assert [path.name for path in (in_tmp / "own").iterdir()] == ["tinya-1.0-py3-none-any.whl"]
    write(in_tmp / "a-file", "")
    monkeypatch.setenv(image.WHEELHOUSE_VARIABLE, str(in_tmp / "a-file"))
    code, out, err = run_cli(capsys, "requirements.in", "-o", "requirements.lock", *flags)
    assert code == EXIT_BAD_INPUT
    assert f"error: $REPROBOX_WHEELHOUSE {in_tmp / 'a-file'} is a regular file, not a folder" in err


def test_a_failure_writes_nothing(in_tmp: Path, wheels: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base_lock_file(in_tmp / "base.lock", wheels, "tinyb==2.0")
    write(in_tmp / "requirements.in", "tinyc\n")
    code, _, err = run_cli(
        capsys,
        *("requirements.in", "-o", "requirements.lock", "--wheelhouse", "house", "--base", "base.lock"),
        *("--no-index", "--find-links", "wheels"),
    )
    assert code == EXIT_BAD_INPUT
    assert err.count("error: ") == 1 and "pins tinyb==2.0" in err
    if resolve_module.uv_binary() is not None:  # uv's reason, then why pip resolves again, in one line
        line = next(
            line for line in err.splitlines() if line.startswith("reprobox: uv found no resolution (")
        )
        assert "tinyc" in line and "tinyb" in line, line  # uv's own reason, in its words
        assert line.endswith(
            "); pip resolves them again, to name the requirement at fault and its fix ..."
        ), line
    assert not (in_tmp / "requirements.lock").exists()
    assert not (in_tmp / "house").exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "nothing to do: give REQUIREMENTS -o LOCK"),
        (["requirements.in"], "-o LOCK is missing"),
        (["-o", "x.lock"], "-o x.lock needs REQUIREMENTS"),
        (["--locked", "x.lock"], "--locked says what to put in a wheelhouse; add --wheelhouse DIR"),
        (["requirements.in", "-o", "x.lock", "--python-version", "three"], "--python-version 'three'"),
        (
            ["requirements.in", "-o", "x.lock", "--find-links", "nowhere"],
            "--find-links nowhere is not a folder",
        ),
        (["requirements.in", "-o", "requirements.in", "--base", "cpu"], "is the requirements file itself"),
        (["requirements.in", "-o", "."], "-o . is a directory"),
    ],
)
def test_flags_that_do_not_go_together_are_refused(
    in_tmp: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    write(in_tmp / "requirements.in", "tinya\n")
    code, _, err = run_cli(capsys, *argv)
    assert code == EXIT_BAD_INPUT
    assert says in err


def test_help_shows_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["lock", "--help"])
    out = capsys.readouterr().out
    assert "reprobox lock requirements.in -o requirements.lock" in out
    assert "--wheelhouse DIR" in out and "exit: 0" in out


def test_the_scripts_wrap_reprobox_lock(tmp_path: Path, wheels: Path) -> None:
    base = base_lock_file(tmp_path / "base.lock", wheels, "tinyb==1.0")
    source = write(tmp_path / "requirements.in", "tinya\n")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}
    lock = tmp_path / "requirements.lock"
    script = [sys.executable, str(ROOT / "scripts" / "lock_requirements.py"), str(source), "-o", str(lock)]
    done = subprocess.run(
        [*script, "--base", str(base)], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert lock.read_text().count("--hash=sha256:") == 1
    fill = [
        "bash",
        str(ROOT / "scripts" / "fill-wheelhouse.sh"),
        "--lock",
        str(lock),
        "--dest",
        str(tmp_path / "h"),
    ]
    done = subprocess.run(fill, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert [path.name for path in (tmp_path / "h").iterdir()] == ["tinya-1.0-py3-none-any.whl"]
