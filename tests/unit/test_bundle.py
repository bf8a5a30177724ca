"""Bundles: packed with a recorded digest, checked whole before anything runs, never extracted outside."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from reprobox import attest, bundle, cli
from reprobox.errors import SpecError, UsageError
from reprobox.jobfile import load_job
from reprobox.records.manifest import RunRecord
from reprobox.reproduce import BIT_IDENTICAL, ReproduceOptions, reproduce
from reprobox.runner import RunOptions, execute
from reprobox.runtimes.local import LocalRuntime

JOBS = Path(__file__).parents[1] / "jobs"


def publish(source: Path, author: Path) -> tuple[Path, RunRecord]:
    code = author / "code"
    shutil.copytree(source, code)
    spec = load_job(code / "job.yaml")
    record = execute(spec, LocalRuntime(), RunOptions(runs_dir=author / "runs"))
    path = attest.write_attestation(
        attest.attestation_path_for(spec.job_file), attest.build_attestation([record])
    )
    return path, record


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunRecord]:
    return publish(JOBS / "publish-small-npz", tmp_path_factory.mktemp("author"))


@pytest.fixture(scope="module")
def packed(small, tmp_path_factory: pytest.TempPathFactory) -> Path:
    attestation, record = small
    out = tmp_path_factory.mktemp("packed") / "bundle.tar"
    bundle.pack(attestation, out, published=record.run_dir)
    return out


def copy_bundle(packed: Path, where: Path, *, with_digest: bool = True) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    target = where / packed.name
    shutil.copy(packed, target)
    if with_digest:
        shutil.copy(bundle.digest_file_for(packed), bundle.digest_file_for(target))
    return target


def files_under(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*")) if path.exists() else []


def test_pack_records_the_bundles_digest_and_indexes_every_member(small, packed: Path) -> None:
    digest = hashlib.sha256(packed.read_bytes()).hexdigest()
    assert bundle.digest_file_for(packed).read_text() == f"{digest}  bundle.tar\n"
    with tarfile.open(packed) as archive:
        names = archive.getnames()
        index = json.load(archive.extractfile("index.json"))  # type: ignore[arg-type]
        members = {m.name: m for m in archive.getmembers()}
        train = archive.extractfile("tree/train.py").read()  # type: ignore[union-attr]
    assert names[0] == "index.json"
    assert set(names[1:]) == set(index["members"])
    assert {"attestation.json", "tree/job.yaml", "tree/train.py", "published/outputs/model.npz"} <= set(names)
    assert index["members"]["tree/train.py"]["sha256"] == hashlib.sha256(train).hexdigest()
    assert index["image"] is None  # the job ran without a container
    assert all(m.uid == 0 and m.mtime == bundle.MEMBER_MTIME for m in members.values())


def test_pack_is_deterministic(small, packed: Path, tmp_path: Path) -> None:
    attestation, record = small
    again = bundle.pack(attestation, tmp_path / "again.tar", published=record.run_dir)
    assert again.sha256 == hashlib.sha256(packed.read_bytes()).hexdigest()


def test_a_bundle_reproduces_bit_identically_with_the_authors_files(packed: Path, tmp_path: Path) -> None:
    target = copy_bundle(packed, tmp_path / "review")
    runs = tmp_path / "runs"
    result = reproduce(target, ReproduceOptions(runtime="local", runs_dir=runs, tolerance=0.0))
    assert (result.verdict, result.exit_code) == (BIT_IDENTICAL, 0)
    assert result.bundle is not None and result.bundle["digest_checked_against"] == "recorded"
    assert result.code_dir is not None and result.code_dir.is_relative_to(runs / "bundles")


def test_pack_refuses_code_that_differs_from_the_attestation(small, tmp_path: Path) -> None:
    attestation, _record = small
    clone = tmp_path / "clone"
    shutil.copytree(attestation.parent, clone)
    (clone / "train.py").write_text("print('other')\n")
    out = tmp_path / "bundle.tar"
    with pytest.raises(UsageError, match=r"changed: train\.py"):
        bundle.pack(clone / attest.ATTESTATION_NAME, out)
    assert not out.exists() and not bundle.digest_file_for(out).exists()


def test_pack_refuses_to_write_into_the_code_folder(small) -> None:
    attestation, _record = small
    with pytest.raises(UsageError, match="outside the code folder"):
        bundle.pack(attestation, attestation.parent / "bundle.tar")


@pytest.mark.parametrize("with_digest", [True, False], ids=["digest-recorded", "no-digest"])
def test_a_truncated_bundle_is_refused_and_nothing_is_left(
    packed: Path, tmp_path: Path, with_digest: bool
) -> None:
    target = copy_bundle(packed, tmp_path / "review", with_digest=with_digest)
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    runs = tmp_path / "runs"
    with pytest.raises(SpecError, match="truncated") as caught:
        reproduce(target, ReproduceOptions(runtime="local", runs_dir=runs))
    assert caught.value.exit_code == 2
    assert files_under(runs) == []


def test_a_bundle_cut_at_a_member_boundary_is_missing_members(packed: Path, tmp_path: Path) -> None:
    with tarfile.open(packed) as archive:
        first_two = archive.getmembers()[:2]
    end = first_two[1].offset_data + ((first_two[1].size + 511) // 512) * 512
    target = tmp_path / "cut.tar"
    target.write_bytes(packed.read_bytes()[:end] + b"\0" * 1024)  # a well-formed tar, short of members
    with pytest.raises(SpecError, match=r"is truncated: \d+ member\(s\) listed in its index are missing"):
        bundle.open_bundle(target, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def flip_byte_in(packed: Path, target: Path, member: str) -> None:
    data = bytearray(packed.read_bytes())
    with tarfile.open(packed) as archive:
        offset = archive.getmember(member).offset_data
    data[offset] ^= 0x01
    target.write_bytes(bytes(data))


def test_an_altered_member_is_refused_by_the_index(packed: Path, tmp_path: Path) -> None:
    target = tmp_path / "bundle.tar"
    flip_byte_in(packed, target, "tree/train.py")  # no recorded digest next to it
    with pytest.raises(SpecError, match=r"tree/train\.py: does not match its sha256"):
        bundle.open_bundle(target, tmp_path / "out")
    assert files_under(tmp_path / "out") == []


def test_an_altered_bundle_is_refused_by_its_recorded_digest(packed: Path, tmp_path: Path) -> None:
    target = copy_bundle(packed, tmp_path / "review")
    data = bytearray(target.read_bytes())
    data[-1] ^= 0x01  # padding after the last member: every member still matches the index
    target.write_bytes(bytes(data))
    with pytest.raises(SpecError, match=r"records \w+: it was truncated or altered"):
        bundle.open_bundle(target, tmp_path / "out")
    assert files_under(tmp_path / "out") == []


def test_a_given_digest_is_checked(packed: Path, tmp_path: Path) -> None:
    target = copy_bundle(packed, tmp_path / "review", with_digest=False)
    with pytest.raises(SpecError, match="--bundle-sha256 records"):
        bundle.open_bundle(target, tmp_path / "out", expected_sha256="0" * 64)
    good = bundle.open_bundle(
        target, tmp_path / "out", expected_sha256=hashlib.sha256(target.read_bytes()).hexdigest()
    )
    assert good.digest_source == "given" and good.attestation.is_file()


# -- hand-made hostile bundles ----------------------------------------------------------------------


def hostile(path: Path, members: list[tuple[tarfile.TarInfo, bytes]], listed: dict[str, Any]) -> Path:
    index = {
        "schema": bundle.BUNDLE_SCHEMA,
        "attestation": {"file": "attestation.json", "sha256": "0" * 64},
        "code": "tree",
        "job_file": "tree/job.yaml",
        "published": None,
        "image": None,
        "members": {"attestation.json": entry(b"{}"), "tree/job.yaml": entry(b"version: 1"), **listed},
    }
    members = [regular("attestation.json", b"{}"), regular("tree/job.yaml", b"version: 1"), *members]
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as archive:
        raw = json.dumps(index).encode()
        info = tarfile.TarInfo("index.json")
        info.size = len(raw)
        archive.addfile(info, io.BytesIO(raw))
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data else None)
    return path


def regular(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, link: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info, b""


def entry(data: bytes = b"x") -> dict[str, Any]:
    return {"type": "file", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


@pytest.mark.parametrize(
    ("members", "listed", "words"),
    [
        ([regular("../evil.txt")], {"../evil.txt": entry()}, "outside the bundle's folder"),
        ([regular("/tmp/evil.txt")], {"/tmp/evil.txt": entry()}, "outside the bundle's folder"),
        ([regular("tree/../../evil.txt")], {"tree/../../evil.txt": entry()}, "outside the bundle's folder"),
        (
            [special("tree/out", tarfile.SYMTYPE, "/tmp"), regular("tree/out/evil.txt")],
            {"tree/out": {"type": "symlink", "target": "/tmp"}, "tree/out/evil.txt": entry()},
            "links to '/tmp', outside",
        ),
        (
            [special("tree/up", tarfile.SYMTYPE, "../../..")],
            {"tree/up": {"type": "symlink", "target": "../../.."}},
            "outside the bundle's folder",
        ),
        (
            [special("tree/here", tarfile.SYMTYPE, "."), special("tree/up", tarfile.SYMTYPE, "here/../..")],
            {
                "tree/here": {"type": "symlink", "target": "."},
                "tree/up": {"type": "symlink", "target": "here/../.."},
            },
            "resolves outside the bundle's folder",
        ),
        ([special("tree/passwd", tarfile.LNKTYPE, "/etc/passwd")], {"tree/passwd": entry()}, "hard link"),
        ([special("tree/null", tarfile.CHRTYPE)], {"tree/null": entry()}, "device file"),
        ([special("tree/fifo", tarfile.FIFOTYPE)], {"tree/fifo": entry()}, "named pipe"),
        ([regular("tree/unlisted.py")], {}, "not listed in the bundle's index"),
        ([regular("tree/a.py"), regular("tree/a.py")], {"tree/a.py": entry()}, "appears twice"),
    ],
    ids=[
        "dot-dot",
        "absolute",
        "dot-dot-inside",
        "write-through-symlink",
        "symlink-up",
        "symlink-chain",
        "hard-link",
        "device",
        "fifo",
        "unlisted",
        "duplicate",
    ],
)
def test_hostile_members_are_refused_and_nothing_is_written_outside(
    tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes]], listed: dict[str, Any], words: str
) -> None:
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    path = hostile(sandbox / "hostile.tar", members, listed)
    before = files_under(tmp_path)
    with pytest.raises(SpecError, match=words):
        bundle.open_bundle(path, sandbox / "work" / "bundles")
    assert files_under(tmp_path) == before  # nothing extracted, nothing left behind
    assert not Path("/tmp/evil.txt").exists()


def test_a_tar_that_is_not_a_bundle_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plain.tar"
    with tarfile.open(path, "w") as archive:
        info, data = regular("readme.txt")
        archive.addfile(info, io.BytesIO(data))
    with pytest.raises(SpecError, match=r"does not start with index\.json"):
        bundle.open_bundle(path, tmp_path / "out")


def test_pack_with_data_carries_a_job_that_sits_above_its_code(tmp_path: Path, capsys) -> None:
    attestation, record = publish(JOBS / "publish-src-layout", tmp_path / "author")
    assert attest.read_attestation(attestation).job["code"] == "src"
    out = tmp_path / "share" / "bundle.tar"
    args = ["pack", str(attestation), "-o", str(out), "--data", "--published", str(record.run_dir), "--json"]
    assert cli.main(args) == 0
    packed = json.loads(capsys.readouterr().out)
    assert (
        packed["data"] == ["tree/data/weights.txt"]
        and packed["sha256"] == bundle.digest_file_for(out).read_text()[:64]
    )
    with tarfile.open(out) as archive:
        assert {"tree/job.yaml", "tree/src/train.py", "tree/data/weights.txt"} <= set(archive.getnames())
    runs = tmp_path / "review" / "runs"
    code = cli.main(["reproduce", str(out), "--runtime", "local", "--runs-dir", str(runs), "-q"])
    assert code == 0
    assert capsys.readouterr().out.startswith("bit-identical to the published checkpoints")
