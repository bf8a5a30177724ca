"""Every file or folder a command writes is checked before any work: a directory, a FIFO or device, a
path under /proc or /sys, a missing, read-only or unwritable folder is refused with exit 2 naming the
flag, the path and why, and nothing is written (not an internal error after the work)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reprobox import cli
from reprobox.commands.targets import check_output_file, check_output_folder
from reprobox.errors import EXIT_BAD_INPUT, UsageError

T = "{target}"
JOB = "{job}"

# (flag, argv): commands that write one file, whose folder must exist
FILE_FLAGS = [
    ("--html", ["report", "{tmp}/run", "--html", T]),
    ("--markdown", ["report", "{tmp}/run", "--markdown", T]),
    ("--html", ["explain", "{tmp}/a", "{tmp}/b", "--html", T]),
    ("--markdown", ["explain", "{tmp}/a", "{tmp}/b", "--markdown", T]),
    ("--attestation", ["verify", JOB, "--runs-dir", "{tmp}/runs", "--attestation", T]),
    ("--html", ["verify", JOB, "--runs-dir", "{tmp}/runs", "--vary", "threads", "--html", T]),
    ("--markdown", ["verify", JOB, "--runs-dir", "{tmp}/runs", "--vary", "threads", "--markdown", T]),
    ("-o", ["attest", "{tmp}/run", "-o", T]),
    ("--job-file", ["init", "--job-file", T, "--", "python", "train.py"]),
]
# commands that write one file and make its missing folders
FILE_FLAGS_MAKING_FOLDERS = [
    ("-o", ["pack", "{tmp}/reprobox.attestation.json", "-o", T]),
    ("-o", ["keygen", "-o", T, "--force"]),
    ("-o", ["lock", "{tmp}/requirements.in", "-o", T]),
]
# commands that write into a folder, made when missing
FOLDER_FLAGS = [
    ("--runs-dir", ["run", JOB, "--runs-dir", T]),
    ("--runs-dir", ["verify", JOB, "--runs-dir", T]),
    ("--runs-dir", ["cost", JOB, "--runs-dir", T]),
    ("--runs-dir", ["audit", JOB, "--runs-dir", T]),
    ("--runs-dir", ["reproduce", "{tmp}/reprobox.attestation.json", "--runs-dir", T]),
    ("--report-dir", ["reproduce", "{tmp}/reprobox.attestation.json", "--report-dir", T]),
    ("--wheelhouse", ["lock", "--wheelhouse", T]),
]

FILE_TARGETS = {
    "a directory": ("{tmp}/folder", "is a directory"),
    "under /proc": (
        "/proc/reprobox-test.out",
        "is under /proc, a kernel file system where no file can be written",
    ),
    "under /sys": ("/sys/reprobox-test.out", "is under /sys, a kernel file system"),
    "a FIFO": ("{tmp}/fifo", "is a FIFO, not a file"),
    "a device": ("/dev/null", "is a character device, not a file"),
    "below a file": ("{tmp}/file.txt/out.html", "{tmp}/file.txt is a regular file, not a folder"),
}
FOLDER_TARGETS = {
    "a file": ("{tmp}/file.txt", "is a regular file, not a folder"),
    "under /proc": ("/proc/reprobox-runs", "is under /proc, a kernel file system"),
    "below a file": ("{tmp}/file.txt/runs", "is under {tmp}/file.txt, which is a regular file, not a folder"),
}


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A job, a file, a folder and a FIFO to point flags at."""
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "job.yaml").write_text("version: 1\nname: t\ncommand: [python, train.py]\n")
    (tmp_path / "job" / "train.py").write_text("print('hi')\n")
    (tmp_path / "file.txt").write_text("x\n")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    return tmp_path


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def refused(
    sandbox: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    target: str,
    flag: str,
    says: str,
    named: str = T,
) -> None:
    fill = {
        "tmp": str(sandbox),
        "job": str(sandbox / "job" / "job.yaml"),
        "target": target.format(tmp=sandbox),
    }
    before = tree(sandbox)
    code = cli.main([arg.format(**fill) for arg in argv])
    out, err = capsys.readouterr()
    assert code == EXIT_BAD_INPUT, err
    assert err.startswith(f"error: {flag} {named.format(**fill)}"), err
    assert says.format(tmp=sandbox) in err and "Traceback" not in err and out == ""
    assert tree(sandbox) == before  # nothing written


@pytest.mark.parametrize("kind", list(FILE_TARGETS))
@pytest.mark.parametrize(("flag", "argv"), FILE_FLAGS + FILE_FLAGS_MAKING_FOLDERS)
def test_an_output_file_that_cannot_be_written_is_refused_first(
    sandbox: Path, capsys: pytest.CaptureFixture[str], flag: str, argv: list[str], kind: str
) -> None:
    target, says = FILE_TARGETS[kind]
    refused(sandbox, capsys, argv, target, flag, says)


@pytest.mark.parametrize(("flag", "argv"), FILE_FLAGS)
def test_an_output_file_in_a_missing_folder_is_refused_first(
    sandbox: Path, capsys: pytest.CaptureFixture[str], flag: str, argv: list[str]
) -> None:
    refused(
        sandbox,
        capsys,
        argv,
        "{tmp}/nowhere/out.file",
        flag,
        "folder {tmp}/nowhere does not exist; create it",
    )


@pytest.mark.parametrize("kind", list(FOLDER_TARGETS))
@pytest.mark.parametrize(("flag", "argv"), FOLDER_FLAGS)
def test_an_output_folder_that_cannot_be_written_is_refused_first(
    sandbox: Path, capsys: pytest.CaptureFixture[str], flag: str, argv: list[str], kind: str
) -> None:
    target, says = FOLDER_TARGETS[kind]
    refused(sandbox, capsys, argv, target, flag, says)


def test_a_markdown_reports_plot_beside_it_is_checked_too(
    sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (sandbox / "report.png").mkdir()
    argv = ["report", "{tmp}/run", "--markdown", T]
    says = "{tmp}/report.png is a directory"
    refused(sandbox, capsys, argv, "{tmp}/report.md", "--markdown", says, named="{tmp}/report.png")


def test_keygen_checks_the_public_key_beside_the_private_one(
    sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (sandbox / "k.key.pub").mkdir()
    argv = ["keygen", "-o", T, "--force"]
    refused(
        sandbox, capsys, argv, "{tmp}/k.key", "-o", "{tmp}/k.key.pub is a directory", named="{tmp}/k.key.pub"
    )


def test_folders_made_on_the_way_are_fine_where_the_command_makes_them(tmp_path: Path) -> None:
    check_output_file(tmp_path / "a" / "b" / "k.key", "-o", make_folders=True)
    check_output_folder(tmp_path / "a" / "runs", "--runs-dir", "fix")
    check_output_file(tmp_path / "report.html", "--html")
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_or_unwritable_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "access", lambda *_args, **_kwargs: False)
    with pytest.raises(UsageError, match=f"folder {tmp_path} is not writable"):
        check_output_file(tmp_path / "r.html", "--html")

    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", lambda _path: ReadOnly())
    with pytest.raises(UsageError, match=f"--runs-dir {tmp_path}/runs: folder {tmp_path} is on a read-only"):
        check_output_folder(tmp_path / "runs", "--runs-dir", "fix")
