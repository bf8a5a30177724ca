"""A full disk in any phase of a run ends in one sentence and exit 4, never a traceback or exit 70.

Real jobs on the local runtime fill a small tmpfs that holds the runs folder to its last byte: one that
then exits 0, one that keeps logging, one whose trail then finds no room, one that also takes the room
set aside for the guest's record (NumPy jobs, but for the trail's: the trail follows torch's optimizer).
Each run is recorded as failed with the sentence, no record is half written, no temporary file or
reserve is left, and the job's outputs are as it left them. A full disk
before the job starts, under the attestation, or under a bundle being unpacked is one sentence too.
Mounting needs root: elsewhere those tests are skipped, and the fake-ENOSPC tests still run.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from small_disk import small_disk

from reprobox import bundle, cli
from reprobox import diskspace as space
from reprobox.bundle import _extract
from reprobox.errors import EXIT_ENVIRONMENT, DiskFull
from reprobox.fileio import AtomicFile, write_text_atomic
from reprobox.records.guest import GuestRecord, guest_reserve_path, read_guest_result, write_guest_record

JOB = Path(__file__).parents[1] / "jobs" / "fills-disk"
SENTENCE = r"the disk holding (?P<folder>\S+) is full: (?P<free>\d+) bytes free; free space and rerun"
LEFTOVERS = re.compile(r"^\..*\.tmp$|^\.tmp-|^\.bundle-|" + re.escape(space.RESERVE_NAME))


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_disk(tmp_path) as folder:
        yield folder


@pytest.fixture(autouse=True)
def crash_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where a traceback file would go: every test checks none was written."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


def fill(folder: Path) -> None:
    """Take every byte left on the disk holding `folder`."""
    fd = os.open(folder / "filler.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        chunk = 1 << 20
        while chunk:
            try:
                while os.write(fd, b"\0" * chunk) == chunk:
                    pass
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
            chunk //= 2
    finally:
        os.close(fd)


def leftovers(root: Path) -> list[str]:
    """Temporary files, temporary folders and reserves anywhere under `root`."""
    return sorted(str(p) for p in root.rglob("*") if LEFTOVERS.search(p.name))


def reprobox(capfd: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    """The command with --json: (exit code, the JSON object, everything else it and the job printed)."""
    capfd.readouterr()
    code = cli.main([*args, "--json"])
    captured = capfd.readouterr()
    return code, json.loads(captured.out), captured.err


def assert_no_crash(crash_dir: Path, err: str) -> None:
    assert "Traceback" not in err, err[-3000:]
    assert "internal error" not in err
    assert not crash_dir.exists() or not list(crash_dir.rglob("crash-*")), "a traceback file was written"


# --- the atomic writer, with a fake full disk -----------------------------------------------------


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT], ids=["ENOSPC", "EDQUOT"])
@pytest.mark.parametrize("where", ["write", "flush"])
def test_an_atomic_write_that_meets_a_full_disk_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, where: str
) -> None:
    target = tmp_path / "record.json"
    target.write_text("old")

    def no_space(*_args: Any) -> None:
        raise OSError(code, os.strerror(code))

    if where == "flush":
        monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError) as raised, AtomicFile(target) as handle:
        handle.write(b"new")
        if where == "write":
            no_space()
    assert raised.value.errno == code
    assert raised.value.filename == str(target)  # the sentence can say which disk is full
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]
    assert target.read_text() == "old"
    full = DiskFull.from_error(raised.value)
    assert full is not None and full.exit_code == EXIT_ENVIRONMENT
    wording = "disk quota for" if code == errno.EDQUOT else "disk holding"
    assert full.message.startswith(f"the {wording} {tmp_path} ")
    assert full.message.endswith("; free space and rerun")


def test_a_full_disk_that_names_no_file_is_still_one_sentence() -> None:
    full = DiskFull.from_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    assert full is not None and full.message == "a disk reprobox was writing to is full; free space and rerun"
    assert DiskFull.from_error(OSError(errno.EACCES, "Permission denied", "/x")) is None


def test_a_full_disk_no_code_expected_is_exit_4_not_an_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], crash_dir: Path
) -> None:
    from reprobox.commands import jobs

    def no_space(_location: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "somewhere" / "file"))

    monkeypatch.setattr(jobs, "read_record", no_space)
    code, data, err = reprobox(capfd, "compare", "a", "b")
    assert code == EXIT_ENVIRONMENT == data["error"]["exit_code"]
    assert re.fullmatch(SENTENCE, data["error"]["message"])
    assert f"error: the disk holding {tmp_path / 'somewhere'} is full" in err
    assert_no_crash(crash_dir, err)


def test_the_trail_stops_the_job_with_a_sentence_on_a_full_disk(tmp_path: Path) -> None:
    with (tmp_path / "trail.jsonl").open("w") as handle:
        stop = space.stop_job(
            OSError(errno.ENOSPC, "No space left on device"), tmp_path / "trail.jsonl", handle
        )
        assert handle.closed
    assert isinstance(stop, SystemExit)
    assert re.fullmatch(
        r"reprobox: trail\.jsonl could not be written, so the job stops here: " + SENTENCE, str(stop.code)
    )
    other = OSError(errno.EIO, "Input/output error")
    assert space.stop_job(other, tmp_path / "trail.jsonl") is other


# --- records on a real full disk ----------------------------------------------------------------


def test_the_guests_record_takes_its_reserve_and_says_the_disk_was_full(disk: Path) -> None:
    (disk / ".reprobox").mkdir()
    space.make_reserve(guest_reserve_path(disk), space.GUEST_RESERVE_BYTES)
    fill(disk)
    write_guest_record(disk, GuestRecord(exit_code=0, command=["python", "train.py"]))
    record = read_guest_result(disk).record
    assert record is not None and record.exit_code == 0
    assert record.disk_full == {"free": 0, "quota": False}
    assert leftovers(disk) == []
    fill(disk)
    with pytest.raises(OSError) as raised:  # no reserve left: the error, and still no temporary file
        write_guest_record(disk, GuestRecord(exit_code=0, environment={"PAD": "x" * 20000}))
    assert raised.value.errno == errno.ENOSPC and leftovers(disk) == []
    assert read_guest_result(disk).record == record


# --- real runs on the local runtime ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("job_file", "saved", "guest_recorded"),
    [
        (JOB / "job.yaml", "model.npy", True),
        (JOB / "log.yaml", "model.npy", True),
        (JOB / "trail.yaml", "model.pt", True),
        (JOB / "all.yaml", "model.npy", False),
    ],
    ids=["fills-then-exits-0", "fills-then-keeps-logging", "trail-meets-it", "takes-the-guests-reserve"],
)
def test_a_job_that_fills_the_disk_is_recorded_as_failed_in_one_sentence(
    disk: Path,
    capfd: pytest.CaptureFixture[str],
    crash_dir: Path,
    job_file: Path,
    saved: str,
    guest_recorded: bool,
) -> None:
    code, data, err = reprobox(capfd, "run", str(job_file), "--runtime", "local", "--runs-dir", str(disk))
    assert code == EXIT_ENVIRONMENT, (data, err[-3000:])
    found = re.fullmatch(SENTENCE, data["error"]["message"])
    assert found is not None, data
    run_dir = Path(data["run_dir"])
    assert found["folder"] == str(run_dir) and found["free"] == "0"
    assert f"error: {data['error']['message']}" in err
    assert_no_crash(crash_dir, err)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert (manifest["status"], manifest["failure"]) == ("failed", data["error"]["message"])
    assert manifest["disk_full"] == {"free": 0, "quota": False}
    assert leftovers(disk) == []
    outputs = run_dir / "outputs"
    assert sorted(p.name for p in outputs.iterdir()) == ["filler.bin", saved]
    assert (outputs / "filler.bin").stat().st_size > 0
    if guest_recorded:  # what the guest hashed is the file the job left, untouched since
        (checkpoint,) = manifest["checkpoints"]
        assert checkpoint["file_sha256"] == hashlib.sha256((outputs / saved).read_bytes()).hexdigest()
    else:
        assert not (run_dir / ".reprobox" / "guest.json").exists()
    if job_file.name == "trail.yaml":
        assert "trail.jsonl could not be written, so the job stops here: the disk holding" in err


@pytest.mark.slow
def test_a_runs_folder_already_full_is_refused_before_the_job_starts(
    disk: Path, capfd: pytest.CaptureFixture[str], crash_dir: Path
) -> None:
    runs = disk / "runs"
    code, data, _ = reprobox(
        capfd, "run", str(JOB / "small.yaml"), "--runtime", "local", "--runs-dir", str(runs)
    )
    assert code == 0, data
    fill(disk)
    before = sorted(p.name for p in (runs / "fills-disk-small").iterdir())
    code, data, err = reprobox(
        capfd, "run", str(JOB / "small.yaml"), "--runtime", "local", "--runs-dir", str(runs)
    )
    assert code == EXIT_ENVIRONMENT, data
    assert data["error"]["message"] == (
        f"the disk holding {runs.resolve() / 'fills-disk-small'} is full: 0 bytes free, fewer than the "
        f"{space.GUEST_RESERVE_BYTES + space.RUN_RESERVE_BYTES} a run sets aside for its records; "
        "free space and rerun"
    )
    assert sorted(p.name for p in (runs / "fills-disk-small").iterdir()) == before  # no run dir left
    (disk / "filler.bin").unlink()
    (disk / "other").mkdir()
    fill(disk / "other")  # the code not yet copied for this runs folder: the copy meets the full disk
    code, data, err2 = reprobox(
        capfd, "run", str(JOB / "small.yaml"), "--runtime", "local", "--runs-dir", str(disk / "runs2")
    )
    assert code == EXIT_ENVIRONMENT, data
    found = re.fullmatch(SENTENCE, data["error"]["message"])
    assert found is not None and found["folder"] == str(disk / "runs2" / "fills-disk-small" / ".code")
    assert leftovers(disk) == []
    assert_no_crash(crash_dir, err + err2)


@pytest.mark.slow
def test_an_attestation_on_a_full_disk_is_one_sentence_and_no_file(
    disk: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], crash_dir: Path
) -> None:
    fill(disk)
    target = disk / "reprobox.attestation.json"
    code, data, err = reprobox(
        capfd,
        *("verify", str(JOB / "small.yaml"), "--runtime", "local", "--runs-dir", str(tmp_path / "runs")),
        *("--attestation", str(target)),
    )
    assert code == EXIT_ENVIRONMENT, data
    found = re.fullmatch(SENTENCE, data["error"]["message"])
    assert found is not None and (found["folder"], found["free"]) == (str(disk), "0")
    assert not target.exists() and leftovers(disk) == []
    assert_no_crash(crash_dir, err)


def test_a_bundle_that_meets_a_full_disk_while_unpacking_leaves_nothing(
    disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = os.urandom(3 << 20)  # more than the disk holds once it is partly filled
    members = {"attestation.json": b"{}", "tree/job.yaml": b"version: 1", "tree/weights.bin": big}
    index = {
        "schema": bundle.BUNDLE_SCHEMA,
        "attestation": {"file": "attestation.json", "sha256": "0" * 64},
        "code": "tree",
        "job_file": "tree/job.yaml",
        "published": None,
        "image": None,
        "members": {
            name: {"type": "file", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
            for name, data in members.items()
        },
    }
    packed = tmp_path / "small.tar"
    with tarfile.open(packed, "w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in [("index.json", json.dumps(index).encode()), *members.items()]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    # Another writer takes the room after the free space was checked: the check is made to pass.
    monkeypatch.setattr(_extract, "FREE_SPACE_MARGIN", -(1 << 40))
    write_text_atomic(disk / "other-writer", "x" * (2 << 20))
    with pytest.raises(DiskFull) as raised:
        bundle.open_bundle(packed, disk / "bundles")
    found = re.fullmatch(SENTENCE, raised.value.message)
    assert found is not None and found["folder"] == str(disk / "bundles"), raised.value.message
    assert sorted(p.name for p in disk.iterdir()) == ["other-writer"]  # staging and its folder removed
