"""`workdir: copy`: a job that writes next to its code runs in a writable copy of it, and its outputs
are exactly what it wrote or changed there (every copy it left alone, and the interpreter's caches,
taken away again); the code snapshot itself is never written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from reprobox import cli
from reprobox.guest import workcopy
from reprobox.records.manifest import read_record
from reprobox.runner import list_runs

JOBS = Path(__file__).parents[1] / "jobs"


def test_the_copy_is_taken_away_but_what_the_job_wrote_or_changed(tmp_path: Path, monkeypatch) -> None:
    code, work = tmp_path / "code", tmp_path / "work"
    (code / "pkg").mkdir(parents=True)
    (code / "empty").mkdir()
    (code / "train.py").write_text("print('hi')\n")
    (code / "pkg" / "mod.py").write_text("x = 1\n")
    (code / "notes.txt").write_text("runs:\n")
    (code / "link.txt").symlink_to("notes.txt")
    (code / "data.bin").write_bytes(b"\0" * 32)
    work.mkdir()
    monkeypatch.setattr(workcopy, "LINK_ABOVE", 16)  # data.bin counts as large here
    copy = workcopy.make(code, work)
    assert (work / "data.bin").is_symlink() and (work / "data.bin").read_bytes() == b"\0" * 32
    assert (work / "link.txt").readlink() == Path("notes.txt")
    # what a run does: a new file, a changed one, an import's cache, a replaced copy, a new folder
    (work / "model.pt").write_bytes(b"weights")
    with (work / "notes.txt").open("a") as notes:
        notes.write("trained\n")
    (work / "pkg" / "__pycache__").mkdir()
    (work / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"pyc")
    (work / "pkg" / "mod.py").write_text("x = 1\n")  # rewritten with the same bytes: not an output
    (work / "out" / "run").mkdir(parents=True)
    (work / "out" / "run" / "ckpt.pt").write_bytes(b"ckpt")
    workcopy.prune(copy)
    left = sorted(p.relative_to(work).as_posix() for p in work.rglob("*"))
    assert left == ["model.pt", "notes.txt", "out", "out/run", "out/run/ckpt.pt"]
    assert (code / "notes.txt").read_text() == "runs:\n"  # the code itself is never written


def test_a_copy_of_a_read_only_snapshot_file_is_the_jobs_to_overwrite(tmp_path: Path) -> None:
    """The snapshot is read-only; a job that saves over a file it finds (a model.pt left by an earlier
    plain run) must be able to, as a job user without root's override."""
    code, work = tmp_path / "code", tmp_path / "work"
    code.mkdir()
    work.mkdir()
    (code / "model.pt").write_bytes(b"old weights")
    (code / "model.pt").chmod(0o444)
    (code / "run.sh").write_text("#!/bin/sh\n")
    (code / "run.sh").chmod(0o555)
    workcopy.make(code, work)
    assert (work / "model.pt").stat().st_mode & 0o777 == 0o644
    assert (work / "run.sh").stat().st_mode & 0o777 == 0o755  # still executable
    assert (code / "model.pt").stat().st_mode & 0o777 == 0o444  # the snapshot stays read-only


def test_a_copy_the_job_replaced_by_a_link_is_left_for_the_hashing_to_refuse(tmp_path: Path) -> None:
    code, work = tmp_path / "code", tmp_path / "work"
    code.mkdir()
    work.mkdir()
    (code / "model.pt").write_bytes(b"pretrained")
    copy = workcopy.make(code, work)
    (work / "model.pt").unlink()
    (work / "model.pt").symlink_to("/etc/hostname")
    workcopy.prune(copy)
    assert (work / "model.pt").is_symlink()


def test_a_script_that_writes_next_to_its_code_just_works(tmp_path: Path, capsys) -> None:
    runs = tmp_path / "runs"
    code = cli.main(
        [
            "verify",
            str(JOBS / "writes-next-to-code"),
            *("--runtime", "local", "--runs-dir", str(runs), "--no-attestation", "--json", "-q"),
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["grade"] == "bit-identical", data["sentence"]
    assert [c["path"] for c in data["checkpoints"]] == ["model.npz", "notes.txt", "out/run/ckpt.pkl"]
    first = list_runs(runs, "writes-next-to-code")[0] / "outputs"
    assert (first / "notes.txt").read_text() == "runs:\ntrained 3 steps in True\n"  # it ran in the copy
    snapshot = next((runs / "writes-next-to-code" / ".code").iterdir())
    assert (snapshot / "notes.txt").read_text() == "runs:\n"


def test_without_a_copy_the_same_job_is_told_how(tmp_path: Path, capsys) -> None:
    job = tmp_path / "job"
    shutil.copytree(JOBS / "writes-next-to-code", job)
    (job / "job.yaml").write_text((job / "job.yaml").read_text().replace("workdir: copy\n", ""))
    runs = tmp_path / "runs"
    assert cli.main(["run", str(job), "--runtime", "local", "--runs-dir", str(runs), "-q"]) == 3
    record = read_record(list_runs(runs, "writes-next-to-code")[0])
    assert "set `workdir: copy` in the job file" in (record.failure or "")


def test_an_unknown_workdir_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "job.yaml").write_text("version: 1\nname: x\ncommand: [python, t.py]\nworkdir: scratch\n")
    assert cli.main(["run", str(tmp_path), "--runtime", "local", "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "workdir: must be code" in err and "copy" in err
    assert not (tmp_path / "runs").exists()


def test_data_kept_beside_the_code_is_read_where_the_script_expects_it(tmp_path: Path, capsys) -> None:
    """A folder the code leaves out (.reproboxignore, or git's ignore) becomes data, mounted read-only
    and linked into the working copy at its own relative path: `open("data/values.txt")` still works."""
    job = tmp_path / "repo"
    (job / "data").mkdir(parents=True)
    (job / "data" / "values.txt").write_text("1 2 3\n")
    (job / ".reproboxignore").write_text("data/\n")
    (job / "train.py").write_text(
        "import pathlib\n"
        "total = sum(map(int, pathlib.Path('data/values.txt').read_text().split()))\n"
        "pathlib.Path('total.txt').write_text(str(total))\n"
    )
    (job / "job.yaml").write_text(
        "version: 1\nname: reads-data-beside\ncommand: [python, train.py]\nworkdir: copy\n"
        "data: [{source: data, target: /data/beside}]\n"
    )
    runs = tmp_path / "runs"
    assert cli.main(["run", str(job), "--runtime", "local", "--runs-dir", str(runs), "--json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    outputs = Path(data["run_dir"]) / "outputs"
    assert sorted(p.name for p in outputs.iterdir()) == ["total.txt"]  # the link went with the copies
    assert (outputs / "total.txt").read_text() == "6"
    snapshot = next((runs / "reads-data-beside" / ".code").iterdir())
    assert not (snapshot / "data").exists()  # data, not code
