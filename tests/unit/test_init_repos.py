"""`reprobox init` on a repository as people clone and install it: cloned without --recursive (its
submodule an empty folder), its own package installed from the tree (`pip install .`, build leftovers
beside it), an evaluation that imports what it needs only after the first checkpoint. No torch: what is
tested is what init learns, not what the job computes."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from reprobox import cli
from reprobox.guest.code_imports import imports_in_code
from reprobox.guest.watch import StopWatch, tree_cpu_seconds, wall_limit
from reprobox.jobfile import load_job
from reprobox.scaffold._observe import _outputs

TRAIN = """\
import time
from ownpkg import save

save("model.pt")
time.sleep(120)  # training goes on; init's watch stops it at the checkpoint above
import evaluate_run

evaluate_run.main()
"""
EVALUATE = """\
import sortedcontainers
from typing import TYPE_CHECKING

try:
    import cycler
except ImportError:
    cycler = None
if TYPE_CHECKING:
    import iniconfig


def main():
    return sortedcontainers.SortedList([2, 1])
"""


def git(folder: Path, *args: str) -> None:
    command = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    subprocess.run(command, check=True, capture_output=True)


def installed_from(site: Path, repo: Path) -> None:
    """ownpkg as `pip install .` in the repository leaves it: copied into site-packages, its metadata
    naming the folder it came from (direct_url.json)."""
    (site / "ownpkg").mkdir(parents=True)
    (site / "ownpkg" / "__init__.py").write_text((repo / "ownpkg" / "__init__.py").read_text())
    info = site / "ownpkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ownpkg\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("ownpkg\n")
    (info / "RECORD").write_text("ownpkg/__init__.py,,\nownpkg-1.0.dist-info/METADATA,,\n")
    (info / "direct_url.json").write_text(json.dumps({"url": repo.as_uri(), "dir_info": {}}))


@pytest.fixture(scope="module")
def initialised(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, int]:
    """One init of the clone, shared by the tests of this module."""
    base = tmp_path_factory.mktemp("repos")
    library = base / "library"
    library.mkdir()
    (library / "lib.py").write_text("x = 1\n")
    git(library, "init", "-q")
    git(library, "add", "-A")
    git(library, "commit", "-qm", "library")
    origin = base / "origin"
    (origin / "ownpkg").mkdir(parents=True)
    (origin / "ownpkg" / "__init__.py").write_text(
        "def save(path):\n    open(path, 'wb').write(b'weights' * 100)\n"
    )
    (origin / "scripts").mkdir()  # run from the top as its README says: python scripts/train.py
    (origin / "scripts" / "train.py").write_text(TRAIN)
    (origin / "scripts" / "evaluate_run.py").write_text(EVALUATE)
    (origin / ".gitignore").write_text("build/\n*.egg-info/\n")
    git(origin, "init", "-q")
    git(origin, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "third_party")
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "training")
    clone = base / "clone"
    git(base, "clone", "-q", str(origin), str(clone))  # no --recursive: third_party/ stays empty
    (clone / "build" / "lib" / "ownpkg").mkdir(parents=True)  # what `pip install .` leaves behind
    (clone / "build" / "lib" / "ownpkg" / "__init__.py").write_text("")
    (clone / "ownpkg.egg-info").mkdir()
    (clone / "ownpkg.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: ownpkg\nVersion: 1.0\n")
    site = base / "env" / "site-packages"
    installed_from(site, clone)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(clone)
        patch.setenv("PYTHONPATH", str(site))
        patch.setenv("PIP_NO_INDEX", "1")  # no package index: the lock fails at once, the job file says so
        patch.setenv("UV_OFFLINE", "1")
        command = ["init", "--json", "-q", "--seconds", "30", "--", sys.executable, "scripts/train.py"]
        out = io.StringIO()
        with redirect_stdout(out):
            code = cli.main(command)
    return clone, json.loads(out.getvalue() or "{}"), code


def test_a_clone_without_its_submodules_gets_a_job_file(initialised: tuple[Path, dict, int]) -> None:
    _clone, data, code = initialised
    assert code == 0, data
    assert data["outputs"] == {"checkpoint": ["model.pt"]}  # what the job wrote, not the repository
    assert data["data"] == []  # the build leftovers and the empty submodule are no input


def test_the_repositorys_own_package_installed_from_it_is_code(initialised: tuple[Path, dict, int]) -> None:
    clone, data, _code = initialised
    job = load_job(clone / "job.yaml")
    assert job.env["PYTHONPATH"] == "."  # the working copy's ownpkg, not an installed one
    assert "ownpkg" not in data["missing_packages"]
    assert "ownpkg is installed from this repository" in data["job"]


def test_what_the_code_imports_after_its_first_checkpoint_is_locked_with_why(
    initialised: tuple[Path, dict, int],
) -> None:
    clone, data, _code = initialised
    assert list(data["missing_packages"]) == ["sortedcontainers"]  # not cycler (optional), iniconfig
    wanted = (clone / "requirements.in").read_text()
    assert "sortedcontainers==" in wanted and "# imported by scripts/evaluate_run.py:1" in wanted
    assert "sortedcontainers==" in data["job"] and "imported by scripts/evaluate_run.py:1" in data["job"]


def test_imports_are_followed_through_the_jobs_own_modules(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("from . import tools\n")
    (tmp_path / "pkg" / "tools.py").write_text("def f():\n    import moviepy.editor\n")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "deep.py").write_text("import pygame\n")
    (tmp_path / "main.py").write_text("import os\nimport pkg\nfrom pkg.sub import deep\n")
    found = imports_in_code([str(tmp_path / "main.py")], str(tmp_path))
    assert {name: (Path(i.file).name, i.line) for name, i in found.items()} == {
        "os": ("main.py", 1),
        "pkg": ("main.py", 2),
        "moviepy": ("tools.py", 2),
        "pygame": ("deep.py", 1),
    }


def test_the_budget_counts_cpu_time_and_the_clock_bounds_it(tmp_path: Path) -> None:
    watch = StopWatch(tmp_path, tmp_path, 10.0, set())
    assert not watch._spent(elapsed=30.0, cpu=2.0)  # a busy machine: the job has had 2 s of CPU
    assert watch._spent(elapsed=12.0, cpu=11.0)
    assert not watch._spent(elapsed=5.0, cpu=20.0)  # many threads: the clock has a say too
    assert watch._spent(elapsed=wall_limit(10.0), cpu=2.0)
    assert watch._spent(elapsed=10.0, cpu=None)  # no /proc: the clock alone
    burn = "import time\nwhile time.process_time() < 0.5: pass\nprint('burnt', flush=True)\ntime.sleep(60)\n"
    with subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True) as busy:
        try:
            assert busy.stdout is not None and busy.stdout.readline() == "burnt\n"
            used = tree_cpu_seconds(busy.pid)
        finally:
            busy.kill()
    assert used is not None and 0.4 < used < 30  # what it burnt, on however busy a machine


def test_the_code_left_as_it_was_is_not_listed_as_written(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("code\n")
    (tmp_path / "README.md").write_text("changed by the job\n")
    (tmp_path / "model.pt").write_bytes(b"w")
    code = {
        "train.py": hashlib.sha256(b"code\n").hexdigest() + "+x",
        "README.md": hashlib.sha256(b"as committed\n").hexdigest(),
    }
    assert _outputs(tmp_path, code) == [("README.md", 19), ("model.pt", 1)]


def test_an_import_the_run_never_reached_is_recorded_with_its_distribution(tmp_path: Path) -> None:
    """In a fresh interpreter, as the job's is: `google` is a namespace several distributions share;
    only the one holding `google.protobuf` is what the code needs."""
    pytest.importorskip("google.protobuf")
    (tmp_path / "evaluate.py").write_text("def run():\n    from google.protobuf import message\n")
    record = tmp_path / "observed.jsonl"
    script = (
        "import sys\nfrom pathlib import Path\nfrom reprobox.guest.observe import Observer\n"
        f"o = Observer(Path({str(record)!r}), {str(tmp_path)!r})\n"
        f"o.sources.add({str(tmp_path / 'evaluate.py')!r})\n"
        "o.imported()\nassert 'google.protobuf' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(line["distribution"], line["why"]) for line in lines if "distribution" in line] == [
        ("protobuf", "imported by evaluate.py:2")
    ]
