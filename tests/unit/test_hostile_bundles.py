"""Bundles from someone else: bombs, sparse members, collisions and garbage are refused before writing."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import time
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobox import bundle
from reprobox.bundle import _extract
from reprobox.errors import EXIT_ENVIRONMENT, EnvironmentProblem, SpecError, UsageError

BUNDLE_ERRORS = (SpecError, UsageError, EnvironmentProblem)
TIB = 1 << 40


def entry(data: bytes = b"x") -> dict[str, Any]:
    return {"type": "file", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def index_for(listed: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": bundle.BUNDLE_SCHEMA,
        "attestation": {"file": "attestation.json", "sha256": "0" * 64},
        "code": "tree",
        "job_file": "tree/job.yaml",
        "published": None,
        "image": None,
        "members": {"attestation.json": entry(b"{}"), "tree/job.yaml": entry(b"version: 1"), **listed},
    }


def add(archive: tarfile.TarFile, name: str, data: bytes, **pax: str) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.pax_headers = dict(pax)
    archive.addfile(info, io.BytesIO(data))


def make_bundle(path: Path, listed: dict[str, Any], members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as archive:
        add(archive, "index.json", json.dumps(index_for(listed)).encode())
        add(archive, "attestation.json", b"{}")
        add(archive, "tree/job.yaml", b"version: 1")
        for name, data in members:
            add(archive, name, data)
    return path


def files_under(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*")) if path.exists() else []


def refused_leaving_nothing(path: Path, words: str, error: type[Exception] = SpecError) -> Exception:
    before = files_under(path.parent)
    start = time.monotonic()
    with pytest.raises(error, match=words) as caught:
        bundle.open_bundle(path, path.parent / "work")
    assert time.monotonic() - start < 2
    assert files_under(path.parent) == before  # no member, no staging folder, no work folder
    return caught.value


# -- sparse members ----------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("tar") is None, reason="needs GNU tar to write sparse members")
@pytest.mark.parametrize("form", ["gnu", "posix"])
@pytest.mark.parametrize("declared", [1, TIB], ids=["listed-small", "listed-1TiB"])
def test_a_small_bundle_with_a_sparse_member_is_refused_before_writing(
    tmp_path: Path, form: str, declared: int
) -> None:
    source = tmp_path / "src"
    (source / "tree").mkdir(parents=True)
    (source / "index.json").write_text(json.dumps(index_for({"tree/big": {**entry(), "size": declared}})))
    (source / "attestation.json").write_bytes(b"{}")
    (source / "tree" / "job.yaml").write_bytes(b"version: 1")
    with (source / "tree" / "big").open("wb") as big:
        big.truncate(TIB)  # a terabyte of holes, a few blocks in the tar
    where = tmp_path / "in"
    where.mkdir()
    path = where / "bomb.tar"
    subprocess.run(
        [
            "tar",
            "-S",
            f"--format={form}",
            "-cf",
            str(path),
            "index.json",
            "attestation.json",
            "tree/job.yaml",
            "tree/big",
        ],
        cwd=source,
        check=True,
    )
    assert path.stat().st_size < 32 << 10
    words = "sparse" if declared == 1 else "declares 1099511627776 bytes"
    refused_leaving_nothing(path, words)


# -- caps on what the index declares -----------------------------------------------------------------


def test_too_many_members_are_refused_before_any_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_extract, "MAX_MEMBERS", 4)
    listed = {f"tree/{n}.py": entry() for n in range(3)}
    path = make_bundle(tmp_path / "many.tar", listed, [(name, b"x") for name in listed])
    refused_leaving_nothing(path, "lists 5 members, over the 4 allowed")


def test_a_member_or_a_total_over_its_cap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_bundle(tmp_path / "big.tar", {"tree/a": {**entry(), "size": 2 * TIB}}, [("tree/a", b"x")])
    refused_leaving_nothing(path, "declares 2199023255552 bytes, over")
    monkeypatch.setattr(_extract, "MAX_TOTAL_BYTES", 10)
    listed = {"tree/a": entry(b"123456"), "tree/b": entry(b"123456")}
    path = make_bundle(tmp_path / "total.tar", listed, [("tree/a", b"123456"), ("tree/b", b"123456")])
    refused_leaving_nothing(path, "in all, over the 10 allowed")


def test_a_bundle_larger_than_the_free_space_is_an_environment_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(_extract.shutil, "disk_usage", lambda _path: usage(100, 90, 10))
    path = make_bundle(tmp_path / "b.tar", {"tree/a": entry()}, [("tree/a", b"x")])
    error = refused_leaving_nothing(path, "has 10 bytes free", EnvironmentProblem)
    assert error.exit_code == EXIT_ENVIRONMENT


@pytest.mark.parametrize(
    ("listed", "members", "words"),
    [
        ({"tree/a": entry(), "tree/a/b": entry()}, [("tree/a", b"x"), ("tree/a/b", b"x")], "lies under"),
        ({"tree/a/b": entry(), "tree/a": entry()}, [("tree/a/b", b"x"), ("tree/a", b"x")], "lies under"),
        (
            {"tree/l": {"type": "symlink", "target": "x"}, "tree/l/f": entry()},
            [("tree/l/f", b"x")],
            "lies under 'tree/l'",
        ),
        ({"tree/a": {"type": "fifo"}}, [], "no valid type and size"),
        ({"tree/a": {**entry(), "size": -1}}, [], "no valid type and size"),
        ({"tree/a": {**entry(), "size": True}}, [], "no valid type and size"),
    ],
    ids=["file-then-child", "child-then-file", "link-then-child", "odd-type", "negative", "bool-size"],
)
def test_collisions_and_odd_entries_are_refused_before_writing(
    tmp_path: Path, listed: dict[str, Any], members: list[tuple[str, bytes]], words: str
) -> None:
    refused_leaving_nothing(make_bundle(tmp_path / "c.tar", listed, members), words)


# -- headers and the index ----------------------------------------------------------------------------


def test_an_oversized_header_extension_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pax.tar"
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as archive:
        add(archive, "index.json", json.dumps(index_for({})).encode())
        add(archive, "attestation.json", b"{}", comment="x" * (2 << 20))
    refused_leaving_nothing(path, "header extension")


def test_a_deeply_nested_index_is_refused_without_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.tar"
    with tarfile.open(path, "w") as archive:
        add(archive, "index.json", b"[" * 100_000 + b"]" * 100_000)
    refused_leaving_nothing(path, r"index\.json: is not JSON \(nests deeper")


@pytest.mark.parametrize(
    "change",
    [{"attestation": ["x"]}, {"image": "image.tar"}, {"code": ["tree"]}, {"job_file": {"a": 1}}],
)
def test_an_index_of_the_wrong_shape_is_refused(tmp_path: Path, change: dict[str, Any]) -> None:
    path = tmp_path / "shape.tar"
    with tarfile.open(path, "w") as archive:
        add(archive, "index.json", json.dumps({**index_for({}), **change}).encode())
    refused_leaving_nothing(path, "must be")


# -- anything at all ----------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=16,
)


def _valid_bytes(tmp_path: Path) -> bytes:
    listed = {"tree/a.py": entry(b"print(1)"), "tree/l": {"type": "symlink", "target": "a.py"}}
    path = make_bundle(tmp_path / "seed.tar", listed, [("tree/a.py", b"print(1)")])
    with tarfile.open(path, "a") as archive:
        info = tarfile.TarInfo("tree/l")
        info.type, info.linkname = tarfile.SYMTYPE, "a.py"
        archive.addfile(info)
    return path.read_bytes()


def _open_quietly(tmp_path: Path, data: bytes) -> None:
    where = tmp_path / "case"
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir()
    path = where / "b.tar"
    path.write_bytes(data)
    try:
        bundle.open_bundle(path, where / "work")
    except BUNDLE_ERRORS:
        assert files_under(where) == ["b.tar"]


def test_the_seed_bundle_for_the_properties_opens(tmp_path: Path) -> None:
    data = _valid_bytes(tmp_path)
    path = tmp_path / "ok" / "b.tar"
    path.parent.mkdir()
    path.write_bytes(data)
    opened = bundle.open_bundle(path, tmp_path / "ok" / "work")
    assert (opened.root / "tree" / "l").read_text() == "print(1)"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 8191), st.integers(0, 255)), min_size=1, max_size=8))
def test_a_bundle_with_any_bytes_changed_opens_or_is_refused(
    tmp_path: Path, flips: list[tuple[int, int]]
) -> None:
    data = bytearray(_valid_bytes(tmp_path))
    for offset, value in flips:
        data[offset % len(data)] = value
    _open_quietly(tmp_path, bytes(data))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=3000))
def test_any_bytes_as_a_bundle_are_refused(tmp_path: Path, data: bytes) -> None:
    _open_quietly(tmp_path, data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(sorted(index_for({}))), JSON, max_size=4), JSON)
def test_any_index_contents_open_or_are_refused(tmp_path: Path, change: dict[str, Any], member: Any) -> None:
    index = {**index_for({}), **change}
    if isinstance(index.get("members"), dict):
        index["members"]["tree/x"] = member
    where = tmp_path / "idx"
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir()
    with tarfile.open(where / "b.tar", "w") as archive:
        add(archive, "index.json", json.dumps(index).encode())
        add(archive, "attestation.json", b"{}")
        add(archive, "tree/x", b"x")
    try:
        bundle.open_bundle(where / "b.tar", where / "work")
    except BUNDLE_ERRORS:
        assert files_under(where) == ["b.tar"]
