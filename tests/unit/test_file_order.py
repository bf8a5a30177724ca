"""The file-order variation: Python-level listings of the job's folders reversed, nothing else touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reprobox.guest import settings
from reprobox.guest.variation import VariationRefused, apply
from reprobox.runtimes.base import Variation

LISTS = """
import glob, json, os, pathlib, sys
root, other = sys.argv[1], sys.argv[2]
os.chdir(root)
with os.scandir(root) as found:
    scanned = [e.name for e in found]
print(json.dumps({
    "listdir": os.listdir(root), "cwd": os.listdir(), "scandir": scanned,
    "walk": next(os.walk(root))[2], "glob": [os.path.basename(p) for p in glob.glob(root + "/*")],
    "iterdir": [p.name for p in pathlib.Path(root).iterdir()],
    "rglob": [p.name for p in pathlib.Path(root).rglob("*.txt")],
    "other": os.listdir(other), "fd": os.listdir(os.open(root, os.O_RDONLY)),
}))
"""


def listings(tmp_path: Path, env: dict[str, str]) -> dict[str, list[str]]:
    root, other = tmp_path / "code", tmp_path / "elsewhere"
    for folder in (root, other):
        folder.mkdir(exist_ok=True)
        for name in ("b.txt", "d.txt", "a.txt", "c.txt"):
            (folder / name).write_text(name)
    boot = Path(__file__).parents[2] / "reprobox" / "guest" / "_boot"
    child = {
        **os.environ,
        settings.HOOK_ACTIVE: "1",
        "PYTHONPATH": os.pathsep.join([str(boot), str(Path(__file__).parents[2])]),
        **env,
    }
    done = subprocess.run(
        [sys.executable, "-c", LISTS, str(root), str(other)],
        env=child,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, list[str]] = json.loads(done.stdout)
    return result


def test_every_python_listing_of_the_roots_is_reversed_and_others_are_not(tmp_path: Path) -> None:
    plain = listings(tmp_path, {})
    assert len({tuple(names) for key, names in plain.items() if key != "rglob"}) == 1  # one file system order
    order = plain["listdir"]
    reversed_env = {settings.FILE_ORDER: "reversed", settings.FILE_ORDER_ROOTS: str(tmp_path / "code")}
    varied = listings(tmp_path, reversed_env)
    for key in ("listdir", "cwd", "scandir", "walk", "glob", "iterdir", "rglob", "fd"):
        assert varied[key] == list(reversed(plain[key])), key
    assert varied["other"] == order  # a folder outside the roots keeps the file system's order


def test_the_code_folder_is_the_default_root(tmp_path: Path) -> None:
    env = {settings.FILE_ORDER: "reversed", settings.CODE_DIR: str(tmp_path / "code")}
    varied, plain = listings(tmp_path, env), listings(tmp_path, {})
    assert varied["listdir"] == list(reversed(plain["listdir"])) and varied["other"] == plain["other"]


def test_the_variation_reaches_the_guest_and_unknown_orders_are_refused() -> None:
    variation = Variation(file_order="reversed")
    assert variation.guest_env() == {settings.FILE_ORDER: "reversed"}
    roots = variation.file_order_roots("/c", ["/d1", "/d2"])
    assert roots == {settings.FILE_ORDER_ROOTS: os.pathsep.join(["/c", "/d1", "/d2"])}
    assert Variation().file_order_roots("/c", ["/d"]) == {}
    apply({settings.FILE_ORDER: "reversed"}, {})
    with pytest.raises(VariationRefused, match="shuffled"):
        apply({settings.FILE_ORDER: "shuffled"}, {})


def test_an_unvaried_process_imports_nothing_for_it() -> None:
    # Unvaried processes import nothing for it: the hook's startup cost stays as it was.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, reprobox.guest.hook as h; h.install(); "
            "print('reprobox.guest.file_order' in sys.modules)",
        ],
        env={**os.environ, settings.HOOK_ACTIVE: "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "False"
