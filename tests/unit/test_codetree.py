"""Code identity: which files are the code (git, .reproboxignore), the snapshot every run of a verify runs,
the data digests made once per verify, and one attestation per job file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from reprobox import attest, cli, codetree, progress, verify
from reprobox.compare import Comparison
from reprobox.errors import UsageError
from reprobox.guest.hashing import file_sha256
from reprobox.jobfile import load_job
from reprobox.records.manifest import RunRecord, read_record
from reprobox.runner import RunOptions, list_runs
from reprobox.runtimes.local import LocalRuntime

# Copies one line of its own code and the data into its output, so a run shows which code it ran.
TRAIN = """\
import os, pathlib
VERSION = "one"
out = pathlib.Path(os.environ["REPROBOX_OUTPUT_DIR"])
data = os.environ.get("DATA_DIR")
text = VERSION + (pathlib.Path(data, "a.txt").read_text() if data else "")
(out / "result.txt").write_text(text)
print("wrote", text, flush=True)
"""


def make_job(folder: Path, name: str = "demo", *, job_file: str = "job.yaml", extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text(TRAIN)
    path = folder / job_file
    path.write_text(f"version: 1\nname: {name}\ncommand: [python, train.py]\ncheckpoints: ['*.txt']\n{extra}")
    return path


def git(folder: Path, *args: str) -> str:
    command = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def test_in_a_git_work_tree_the_code_is_what_git_would_commit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    code = repo / "project"  # the code folder is a subfolder of the work tree
    make_job(code)
    git(repo, "init", "-q")
    (repo / ".gitignore").write_text("*.log\ndata/\n")
    (code / "gone.py").write_text("x = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "first")
    (code / "gone.py").unlink()  # tracked but deleted from disk: not code any more
    (code / "helper.py").write_text("y = 2\n")  # untracked, not ignored: code
    (code / "train.log").write_text("ignored by .gitignore\n")
    (code / "data").mkdir()
    (code / "data" / "x.bin").write_bytes(b"\0" * 8)
    (code / "__pycache__").mkdir()
    (code / "__pycache__" / "helper.cpython-311.pyc").write_bytes(b"pyc")  # untracked, not ignored by git
    (code / "reprobox.attestation.json").write_text("{}")

    tree = codetree.digest_tree(code)

    assert sorted(tree.files) == ["helper.py", "job.yaml", "train.py"]
    assert tree.selection == codetree.MODE_GIT
    assert tree.git is not None
    assert tree.git.commit == git(repo, "rev-parse", "HEAD")
    assert tree.git.root == str(repo.resolve())
    assert tree.git.dirty  # helper.py is new and gone.py was deleted
    assert tree.files["train.py"] == file_sha256(code / "train.py")

    (code / "helper.py").unlink()
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "second")
    clean = codetree.digest_tree(code)
    assert clean.git is not None and not clean.git.dirty  # the attestation and the .pyc do not count
    assert clean.git.commit == git(repo, "rev-parse", "HEAD")
    assert clean.to_json()["git"]["commit"] == clean.git.commit


def test_elsewhere_reproboxignore_and_the_built_in_defaults_decide(tmp_path: Path) -> None:
    code = tmp_path / "code"
    make_job(code)
    (code / ".reproboxignore").write_text("data/\n*.ckpt\n!keep.ckpt\n")
    for relative in (
        "data/big.bin",
        "model.ckpt",
        "keep.ckpt",
        "pkg/module.py",
        "pkg/__pycache__/module.cpython-311.pyc",
        ".venv/lib/site.py",
        "venv/bin/python",
        ".pytest_cache/v/x",
        ".mypy_cache/x",
        ".ruff_cache/x",
        ".ipynb_checkpoints/nb.ipynb",
        ".git/HEAD",
        "runs/demo/x/manifest.json",
        "out/runs-here/x.json",
        "reprobox.attestation.json",
        "job-2.reprobox.attestation.json",
    ):
        (code / relative).parent.mkdir(parents=True, exist_ok=True)
        (code / relative).write_text(relative)
    (code / "link.py").symlink_to("train.py")
    (code / "pkg-link").symlink_to("pkg", target_is_directory=True)
    os.mkfifo(code / "data" / "a-fifo")  # ignored, so never opened (an unignored one is refused)
    (code / "run.sh").write_text("#!/bin/sh\n")
    (code / "run.sh").chmod(0o755)

    tree = codetree.digest_tree(code, exclude=(code / "out" / "runs-here",))

    assert sorted(tree.files) == [
        ".reproboxignore",
        "job.yaml",
        "keep.ckpt",
        "link.py",
        "pkg-link",
        "pkg/module.py",
        "run.sh",
        "train.py",
    ]
    assert tree.selection == codetree.MODE_IGNORE_FILE and tree.git is None
    assert tree.files["link.py"] == "link:train.py"
    assert tree.files["pkg-link"] == "link:pkg"
    assert tree.files["run.sh"].endswith("+x")
    assert tree.digest == codetree.tree_digest(tree.files)  # the digest contract is unchanged


def test_the_snapshot_is_read_only_reused_and_replaced_when_damaged(tmp_path: Path) -> None:
    code = tmp_path / "code"
    make_job(code)
    store = tmp_path / "runs" / "demo" / codetree.SNAPSHOTS_DIR

    first = codetree.snapshot_code(code, store)
    assert not first.reused
    assert first.path == store / first.tree.digest
    assert (first.path / "train.py").read_text() == TRAIN
    assert not (first.path / "train.py").stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    assert first.manifest_entry()["path"] == str(code)
    assert first.manifest_entry()["snapshot"] == str(first.path)

    again = codetree.snapshot_code(code, store)
    assert again.reused and again.path == first.path

    (first.path / "left-by-a-job.txt").write_text("x")  # a local job wrote into its working directory
    repaired = codetree.snapshot_code(code, store)
    assert not repaired.reused and repaired.path == first.path
    assert sorted(p.name for p in repaired.path.iterdir()) == ["job.yaml", "train.py"]
    assert [p.name for p in store.iterdir()] == [first.tree.digest]  # no temporary or stale folder left

    (code / "train.py").write_text(TRAIN.replace('"one"', '"two"'))
    changed = codetree.snapshot_code(code, store)
    assert changed.tree.digest != first.tree.digest and changed.path != first.path
    assert (first.path / "train.py").read_text() == TRAIN  # the old snapshot is untouched


def verify_in_process(
    job_file: Path, runs_dir: Path, on_progress: dict[str, Callable[[], None]] | None = None
) -> tuple[Comparison, list[RunRecord], list[str]]:
    """verify on the local runtime with a progress reporter that can act between runs."""
    spec = load_job(job_file)

    class Acting(progress.Recorder):
        def notice(self, text: str) -> None:
            super().notice(text)
            action = (on_progress or {}).get(text.split(" of ", maxsplit=1)[0])
            if action is not None:
                action()

    with progress.reporting(Acting()) as reporter:
        comparison, records = verify.verify(
            spec, LocalRuntime(), RunOptions(runs_dir=runs_dir), verify.VerifyOptions(runs=2)
        )
    return comparison, records, reporter.lines


def test_an_edit_during_verify_changes_nothing(tmp_path: Path) -> None:
    code = tmp_path / "code"
    job_file = make_job(code)

    def edit() -> None:
        (code / "train.py").write_text(TRAIN.replace('"one"', '"two"'))
        (code / "notes.txt").write_text("written while verify ran")

    comparison, records, _ = verify_in_process(job_file, tmp_path / "runs", {"run 2/2": edit})

    assert comparison.verdict == "identical"
    digests = {r.data["code"]["sha256"] for r in records}
    snapshots = {r.data["code"]["snapshot"] for r in records}
    assert len(digests) == 1 and len(snapshots) == 1
    assert "notes.txt" not in records[1].data["code"]["files"]
    assert all((r.run_dir / "outputs" / "result.txt").read_text() == "one" for r in records)
    assert records[0].data["code"]["path"] == str(code)  # the manifest names the user's folder
    assert records[0].data["job"]["code"] == str(code)

    comparison, later, _ = verify_in_process(job_file, tmp_path / "runs")  # the next verify sees the edit
    assert (later[0].run_dir / "outputs" / "result.txt").read_text() == "two"
    assert later[0].data["code"]["sha256"] not in digests


def test_data_is_hashed_once_per_verify_and_recorded_in_every_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = tmp_path / "code"
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("alpha")
    (data / "b.txt").write_text("beta!")
    single = tmp_path / "labels.csv"
    single.write_text("x,y\n")
    job_file = make_job(
        code,
        extra=(
            f"data:\n  - {{source: {data}, target: /data, env: DATA_DIR}}\n"
            f"  - {{source: {single}, target: /labels.csv}}\n"
        ),
    )
    monkeypatch.setattr("reprobox.codetree._data.LARGE_BYTES", 1)  # treat it as large: progress shown
    before = codetree.tree_digest(
        {"a.txt": file_sha256(data / "a.txt"), "b.txt": file_sha256(data / "b.txt")}
    )

    def edit() -> None:
        (data / "b.txt").write_text("changed during verify")

    comparison, records, messages = verify_in_process(job_file, tmp_path / "runs", {"run 2/2": edit})

    assert comparison.verdict == "identical"
    first, second = (r.data["data"] for r in records)
    assert first == second  # hashed once, before the first run: the edit before run 2 does not show
    assert first == [
        {"source": str(data), "target": "/data", "kind": "folder", "sha256": before, "files": 2, "bytes": 10},
        {
            "source": str(single),
            "target": "/labels.csv",
            "kind": "file",
            "sha256": file_sha256(single),
            "files": 1,
            "bytes": 4,
        },
    ]
    assert codetree.digest_data(load_job(job_file).data)[0].sha256 != before  # the next verify sees it
    assert any(m.startswith(f"hashing data {data}") for m in messages)


def test_each_job_file_gets_its_own_attestation_with_the_git_facts(tmp_path: Path) -> None:
    code = tmp_path / "code"
    make_job(code)
    make_job(code, "demo-2threads", job_file="job-2threads.yaml", extra="determinism: {threads: 2}\n")
    git(code, "init", "-q")
    git(code, "add", "-A")
    git(code, "commit", "-qm", "paper")
    runs = tmp_path / "runs"

    for name in ("job.yaml", "job-2threads.yaml"):
        assert (
            cli.main(["verify", str(code / name), "--runtime", "local", "--runs-dir", str(runs), "-q"]) == 0
        )

    plain = code / attest.ATTESTATION_NAME
    second = code / f"job-2threads.{attest.ATTESTATION_NAME}"
    assert attest.attestation_path_for(code / "job.yaml") == plain
    assert attest.attestation_path_for(code / "job-2threads.yaml") == second
    first_att, second_att = attest.read_attestation(plain), attest.read_attestation(second)
    assert first_att.job["file"] == "job.yaml" and second_att.job["file"] == "job-2threads.yaml"
    # The first attestation was in the folder when the second job ran: the code is the same code.
    assert first_att.code["sha256"] == second_att.code["sha256"]
    assert sorted(second_att.code["files"]) == ["job-2threads.yaml", "job.yaml", "train.py"]
    assert second_att.code["git"] == {"commit": git(code, "rev-parse", "HEAD"), "dirty": False}
    assert attest.locate_code(second_att) == code  # reproduce and pack find the job file next to it

    assert attest.attestation_in(code) == plain
    plain.unlink()
    assert attest.attestation_in(code) == second
    (code / f"other.{attest.ATTESTATION_NAME}").write_text("{}")
    with pytest.raises(UsageError, match="several attestations"):
        attest.attestation_in(code)


def test_verify_with_its_output_redirected_into_the_job_folder(tmp_path: Path) -> None:
    code = tmp_path / "code"
    job_file = make_job(code)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}

    def reprobox(log: str, *args: str) -> int:
        with (code / log).open("w") as out:  # `reprobox ... > LOG` inside the code folder
            done = subprocess.run(
                [sys.executable, "-m", "reprobox", *args],
                check=False,
                cwd=code,
                stdout=out,
                stderr=subprocess.PIPE,
                env=env,
            )
        return done.returncode

    assert reprobox("verify.log", "verify", job_file.name, "--runtime", "local", "--runs", "2") == 0
    assert "wrote" in (code / "verify.log").read_text()  # the job's output went there, growing between runs
    records = [read_record(r) for r in list_runs(code / "runs", "demo")]
    assert len(records) == 2
    assert sorted(records[0].data["code"]["files"]) == ["job.yaml", "train.py"]
    att = json.loads((code / attest.ATTESTATION_NAME).read_text())
    assert sorted(att["predicate"]["code"]["files"]) == ["job.yaml", "train.py"]

    # The reviewer's clone has no verify.log; the log they write while checking the code is not code.
    (code / "verify.log").unlink()
    assert reprobox("reproduce.log", "reproduce", ".", "--runtime", "local") == 0
    assert "bit-identical" in (code / "reproduce.log").read_text()


def test_submodules_nested_repositories_and_worktrees_are_code_as_their_own_git_says(tmp_path: Path) -> None:
    """A clone made without --recursive leaves its submodule an empty folder that git lists from inside
    as `./`: it holds no code, and selecting never enters a folder twice. A nested repository and a
    worktree are selected by their own git."""
    library = tmp_path / "library"
    library.mkdir()
    (library / "lib.py").write_text("x = 1\n")
    git(library, "init", "-q")
    git(library, "add", "-A")
    git(library, "commit", "-qm", "lib")
    origin = tmp_path / "origin"
    make_job(origin)
    git(origin, "init", "-q")
    git(origin, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "with a submodule")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    assert (clone / "lib").is_dir() and not any((clone / "lib").iterdir())  # uninitialised
    assert codetree.select_files(clone).files == (".gitmodules", "job.yaml", "train.py")

    git(clone, "worktree", "add", "-q", "other")
    nested = clone / "nested"
    nested.mkdir()
    (nested / "n.py").write_text("y = 2\n")
    git(nested, "init", "-q")
    files = codetree.select_files(clone).files
    assert "nested/n.py" in files and "other/train.py" in files and "train.py" in files
