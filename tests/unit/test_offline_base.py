"""`reprobox offline-base`: the recipe ships in the package and runs with nothing from a checkout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from reprobox import cli
from reprobox.image.offline_base import RECIPE, offline_base_command

ROOT = Path(__file__).resolve().parents[2]


def test_the_command_runs_the_packaged_recipe_with_the_options_given() -> None:
    assert RECIPE.is_file() and RECIPE.is_relative_to(ROOT / "reprobox")
    command = offline_base_command("my/base:1", force=True, refresh=True)
    assert command[1:] == [str(RECIPE), "--tag", "my/base:1", "--force", "--refresh"]
    assert Path(command[0]).name == "bash"


def test_without_an_engine_the_recipe_says_how_to_start_one_and_exits_4(tmp_path: Path) -> None:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "docker").write_text("#!/bin/sh\nexit 1\n")  # an engine that does not answer
    (fake_bin / "docker").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}",
        "REPROBOX_CACHE": str(tmp_path),
    }
    done = subprocess.run(
        offline_base_command(), env=env, cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 4
    assert done.stderr.startswith("reprobox offline-base: no Docker engine answers")
    assert "scripts/" not in done.stderr and "sudo systemctl start docker" in done.stderr


def test_bad_arguments_are_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        cli.main(["offline-base", "--bogus"])
    assert raised.value.code == 2
    assert "--bogus" in capsys.readouterr().err


def test_no_message_of_the_package_names_a_checkouts_script() -> None:
    named = []
    for path in sorted((ROOT / "reprobox").rglob("*")):
        if path.suffix in (".py", ".sh") and path.is_file():
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if "scripts/" in line and "created_by" not in line:
                    named.append(f"{path.relative_to(ROOT)}:{number}")
    assert named == []
