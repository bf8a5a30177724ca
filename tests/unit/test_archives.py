"""Zip and tar archives of outputs read as folders: each member by its own reader, within the limits.

The Stable-Baselines3 layout (``policy.pth``, ``policy.optimizer.pth``, ``pytorch_variables.pth``, a JSON
``data`` member, two text members) is built here with zipfile, torch.save and json, as SB3's
``save_to_zip_file`` writes it; the tests that run SB3 itself skip where it is not installed.
"""

from __future__ import annotations

import base64
import bz2
import collections
import io
import json
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from reprobox import compare
from reprobox.errors import UsageError
from reprobox.guest import hashing
from reprobox.guest.hashing import _readers, format_of, hash_checkpoint, load_tensors, load_values
from reprobox.guest.hashing._arrays import _Content
from reprobox.guest.hashing._bounds import MAX_ARCHIVE_DEPTH
from reprobox.records.manifest import RunRecord


def _torch_bytes(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _serialized(obj: object) -> dict[str, str]:
    """A value as SB3's data_to_json writes what JSON cannot hold."""
    return {":type:": str(type(obj)), ":serialized:": base64.b64encode(pickle.dumps(obj)).decode()}


def sb3_members(
    *, weight_seed: int = 0, clock: float = 12.5, start_time: int = 1795836268683894860
) -> dict[str, bytes]:
    g = torch.Generator().manual_seed(weight_seed)
    policy = {
        "mlp_extractor.policy_net.0.weight": torch.randn(4, 3, generator=g),
        "action_net.bias": torch.zeros(2),
    }
    episodes = collections.deque([{"r": 25.0, "l": 25, "t": clock}], maxlen=100)
    data = {"learning_rate": 0.0003, "start_time": start_time, "ep_info_buffer": _serialized(episodes)}
    return {
        "data": json.dumps(data, indent=4).encode(),
        "pytorch_variables.pth": _torch_bytes({}),
        "policy.pth": _torch_bytes(policy),
        "policy.optimizer.pth": _torch_bytes(
            {"state": {}, "param_groups": [{"lr": 0.0003, "params": [0, 1]}]}
        ),
        "_stable_baselines3_version": b"2.9.2",
        "system_info.txt": b"- OS: Linux\n- Python: 3.11.7\n",
    }


def write_zip(
    path: Path,
    members: dict[str, bytes],
    *,
    order: list[str] | None = None,
    compression: int = zipfile.ZIP_STORED,
    when: tuple[int, int, int, int, int, int] | None = None,
) -> Path:
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for name in order or members:
            info = zipfile.ZipInfo(name, date_time=when or (2026, 11, 28, 3, 0, 0))
            info.compress_type = compression
            archive.writestr(info, members[name])
    return path


def write_tar(path: Path, members: dict[str, bytes], mode: str = "w:gz", mtime: int = 0) -> Path:
    with tarfile.open(path, mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), mtime
            archive.addfile(info, io.BytesIO(data))
    return path


def test_an_sb3_model_zip_is_read_member_by_member(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "model.zip", sb3_members())
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.format == "zip" and digest.reader == "zip archive reader" and digest.note is None
    names = {t.name for t in digest.tensors}
    assert names == {"policy.pth/mlp_extractor.policy_net.0.weight", "policy.pth/action_net.bias"}
    assert {"data/learning_rate", "data/start_time", "_stable_baselines3_version", "system_info.txt"} <= set(
        digest.metadata
    )
    values = load_values(path)
    assert values["data/learning_rate"] == 0.0003
    assert values["policy.optimizer.pth/param_groups.0.lr"] == 0.0003
    assert values["_stable_baselines3_version"] == "2.9.2"
    # the episode records SB3 cloudpickles into its JSON are values, each named, the clock among them
    assert values["data/ep_info_buffer.:serialized:.__items__.0.t"] == 12.5
    assert values["data/ep_info_buffer.:serialized:.__items__.0.r"] == 25.0
    assert set(values) | {t.name for t in digest.tensors} >= set(digest.metadata)


def test_member_times_order_and_compression_do_not_change_the_content(tmp_path: Path) -> None:
    members = sb3_members()
    first = write_zip(tmp_path / "a.zip", members)
    second = write_zip(
        tmp_path / "b.zip",
        members,
        order=sorted(members, reverse=True),
        compression=zipfile.ZIP_DEFLATED,
        when=(2030, 1, 2, 3, 4, 6),
    )
    a, b = hash_checkpoint(first, relative_to=tmp_path), hash_checkpoint(second, relative_to=tmp_path)
    assert a.file_sha256 != b.file_sha256
    assert (a.content_sha256, a.metadata) == (b.content_sha256, b.metadata)


def test_a_differing_weight_inside_the_zip_is_named_with_its_values(tmp_path: Path) -> None:
    a = write_zip(tmp_path / "a.zip", sb3_members(weight_seed=0))
    b = write_zip(tmp_path / "b.zip", sb3_members(weight_seed=1))
    da, db = hash_checkpoint(a, relative_to=tmp_path), hash_checkpoint(b, relative_to=tmp_path)
    differing = {t.name for t in set(da.tensors) ^ set(db.tensors)}
    assert differing == {"policy.pth/mlp_extractor.policy_net.0.weight"}
    assert da.metadata == db.metadata
    from reprobox import tensordiff

    [diff] = tensordiff.diff_checkpoint_files(a, b, checkpoint="model.zip", names=sorted(differing))
    assert diff.name == "policy.pth/mlp_extractor.policy_net.0.weight" and diff.differing > 0
    tensors, _ = load_tensors(a)
    assert torch.equal(tensors["policy.pth/action_net.bias"], torch.zeros(2))


def test_a_clock_inside_the_data_member_differs_as_its_own_value(tmp_path: Path) -> None:
    a = write_zip(tmp_path / "a.zip", sb3_members(clock=1.25, start_time=1))
    b = write_zip(tmp_path / "b.zip", sb3_members(clock=2.5, start_time=2))
    da, db = hash_checkpoint(a, relative_to=tmp_path), hash_checkpoint(b, relative_to=tmp_path)
    assert da.content_sha256 == db.content_sha256  # the weights are equal
    differing = {k for k in da.metadata if da.metadata[k] != db.metadata.get(k)}
    assert differing == {"data/start_time", "data/ep_info_buffer.:serialized:.__items__.0.t"}


def test_a_tar_of_checkpoints_is_a_folder_too_and_matches_the_zip(tmp_path: Path) -> None:
    weights = io.BytesIO()
    np.save(weights, np.arange(6, dtype=np.float32).reshape(2, 3))
    members = {"ckpt/weights.npy": weights.getvalue(), "ckpt/config.json": b'{"lr": 0.1, "layers": [2, 3]}'}
    tarred = hash_checkpoint(write_tar(tmp_path / "ckpt.tar.gz", members, mtime=1), relative_to=tmp_path)
    again = hash_checkpoint(write_tar(tmp_path / "again.tgz", members, mtime=99), relative_to=tmp_path)
    zipped = hash_checkpoint(write_zip(tmp_path / "ckpt.zip", members), relative_to=tmp_path)
    assert tarred.format == "tar" and [t.name for t in tarred.tensors] == ["ckpt/weights.npy"]
    assert tarred.content_sha256 == again.content_sha256 == zipped.content_sha256
    assert tarred.metadata == zipped.metadata == again.metadata
    assert set(tarred.metadata) == {"ckpt/config.json/lr", "ckpt/config.json/layers"}
    assert format_of(tmp_path / "ckpt.tar.gz") == "tar"


def test_an_archive_of_values_alone_is_its_values(tmp_path: Path) -> None:
    one = hash_checkpoint(write_zip(tmp_path / "a.zip", {"m.json": b'{"acc": 0.5}'}), relative_to=tmp_path)
    two = hash_checkpoint(write_zip(tmp_path / "b.zip", {"m.json": b'{"acc": 0.75}'}), relative_to=tmp_path)
    assert not one.tensors and one.content_sha256 == one.metadata_sha256
    assert one.content_sha256 != two.content_sha256


def test_nested_archives_recurse_to_a_depth_limit(tmp_path: Path) -> None:
    inner = write_zip(tmp_path / "inner.zip", {"w.json": b'{"w": 1}'}).read_bytes()
    digest = hash_checkpoint(write_zip(tmp_path / "outer.zip", {"inner.zip": inner}), relative_to=tmp_path)
    assert set(digest.metadata) == {"inner.zip/w.json/w"}
    assert load_values(tmp_path / "outer.zip") == {"inner.zip/w.json/w": 1}

    data = b'{"w": 1}'
    name = "w.json"
    for level in range(MAX_ARCHIVE_DEPTH + 1):
        data, name = write_zip(tmp_path / f"level{level}.zip", {name: data}).read_bytes(), f"level{level}.zip"
    deep = tmp_path / name
    result = hash_checkpoint(deep, relative_to=tmp_path)
    assert result.note is not None and f"nest deeper than the limit of {MAX_ARCHIVE_DEPTH}" in result.note
    with pytest.raises(UsageError, match="refused"):
        hash_checkpoint(deep, relative_to=tmp_path, strict=True)


def test_a_zip_bomb_is_refused_from_its_directory(tmp_path: Path) -> None:
    bomb = write_zip(tmp_path / "bomb.zip", {"zeros.json": b" " * (32 << 20)}, compression=zipfile.ZIP_BZIP2)
    assert bomb.stat().st_size < 1 << 12
    digest = hash_checkpoint(bomb, relative_to=tmp_path)
    assert digest.format == "file" and digest.content_sha256 == digest.file_sha256
    assert digest.note is not None and "over 1100 times, the limit" in digest.note
    with pytest.raises(UsageError, match=r"bomb\.zip is refused"):
        hash_checkpoint(bomb, relative_to=tmp_path, strict=True)
    with pytest.raises(UsageError, match="cannot be read safely"):
        load_tensors(bomb)
    assert bz2.decompress(bz2.compress(b"x")) == b"x"  # the codec the bomb used is the standard one


def test_a_compressed_tar_bomb_is_refused_before_it_is_decompressed(tmp_path: Path) -> None:
    bomb = write_tar(tmp_path / "bomb.tar.bz2", {"zeros.bin": b"\0" * (64 << 20)}, mode="w:bz2")
    digest = hash_checkpoint(bomb, relative_to=tmp_path)
    assert digest.format == "file" and digest.note is not None and "times the archive" in digest.note


def test_a_member_named_outside_the_archive_refuses_it(tmp_path: Path) -> None:
    digest = hash_checkpoint(write_zip(tmp_path / "evil.zip", {"../x.json": b"{}"}), relative_to=tmp_path)
    assert digest.format == "file" and digest.note is not None and "outside the archive" in digest.note


def test_duplicate_members_and_text_members_are_values(tmp_path: Path) -> None:
    path = tmp_path / "dup.zip"
    with zipfile.ZipFile(path, "w") as archive, pytest.warns(UserWarning, match="Duplicate name"):
        archive.writestr("notes.txt", "first")
        archive.writestr("notes.txt", "second")
    values = load_values(path)
    assert values == {"notes.txt": "first", "notes.txt#2": "second"}
    assert set(hash_checkpoint(path, relative_to=tmp_path).metadata) == set(values)


def test_a_member_no_reader_reads_leaves_the_archive_compared_as_bytes(tmp_path: Path) -> None:
    members = {"config.json": b'{"lr": 0.1}', "model.weights.h5": b"\x89HDF\r\n\x1a\n" + bytes(range(256))}
    path = write_zip(tmp_path / "model.keras", members)
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.format == "file" and digest.content_sha256 == digest.file_sha256
    assert digest.note is not None and "member 'model.weights.h5'" in digest.note
    with pytest.raises(UsageError, match=r"model\.weights\.h5"):
        load_tensors(path)


def test_containers_of_other_formats_stay_theirs(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(2)}, tmp_path / "model.pt")
    np.savez(tmp_path / "arrays.npz", a=np.ones(2))
    (tmp_path / "legacy.pth.tar").write_bytes((tmp_path / "model.pt").read_bytes())
    assert format_of(tmp_path / "model.pt") == "torch"
    assert format_of(tmp_path / "legacy.pth.tar") == "torch"
    assert format_of(tmp_path / "arrays.npz") == "numpy"
    write_zip(tmp_path / "not_torch.pt", {"w.json": b'{"w": 1}'})
    assert format_of(tmp_path / "not_torch.pt") == "zip"


def test_the_next_format_is_one_row_in_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reprobox.guest.hashing._canonical import _metadata_digests

    def plan(path: Path) -> _Content:
        return _Content("kv", metadata=_metadata_digests([("k", path.read_text())]), values_only=True)

    row = _readers.Reader(
        format="kv",
        what="key-value file",
        detect=lambda path: path.suffix == ".kv",
        plan=plan,
        load=lambda path: ({}, {"k": path.read_text()}),
        bounds="none",
        yields="values",
    )
    monkeypatch.setattr(_readers, "READERS", (row, *_readers.READERS))
    write_zip(tmp_path / "bundle.zip", {"x.kv": b"one"})
    digest = hash_checkpoint(tmp_path / "bundle.zip", relative_to=tmp_path)
    assert set(digest.metadata) == {"x.kv/k"} and load_values(tmp_path / "bundle.zip") == {"x.kv/k": "one"}
    assert hashing.reader_for(tmp_path / "bundle.zip") is not None


def test_every_row_says_what_it_reads_and_within_what_limits() -> None:
    formats = [reader.format for reader in hashing.READERS]
    assert {"torch", "pickle", "safetensors", "numpy", "json", "csv", "zip", "tar", "tensorboard"} <= set(
        formats
    )
    assert all(reader.what and reader.yields and reader.bounds for reader in hashing.READERS)
    # archives come after every format whose files are zips or tars of their own
    assert formats.index("zip") > max(formats.index("torch"), formats.index("numpy"))


@pytest.mark.slow  # imports SB3 and Gymnasium and trains two tiny PPO models
def test_a_real_stable_baselines3_model_reproduces_its_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("stable_baselines3")
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path / "sb3-logs"))  # else PPO leaves a folder in /tmp
    pytest.importorskip("gymnasium")
    import gymnasium as gym
    from stable_baselines3 import PPO

    def train(path: Path) -> Path:
        model = PPO(
            "MlpPolicy", gym.make("CartPole-v1"), n_steps=32, batch_size=16, n_epochs=1, seed=0, device="cpu"
        )
        model.learn(32)
        model.save(path)
        return path.with_suffix(".zip")

    a, b = (
        hash_checkpoint(train(tmp_path / "a"), relative_to=tmp_path),
        hash_checkpoint(train(tmp_path / "b"), relative_to=tmp_path),
    )
    assert a.format == "zip" and a.file_sha256 != b.file_sha256  # start_time, episode clocks
    assert any(t.name.startswith("policy.pth/mlp_extractor.") for t in a.tensors)
    assert a.content_sha256 == b.content_sha256  # the weights
    differing = sorted(k for k in a.metadata if a.metadata[k] != b.metadata.get(k))
    assert "data/start_time" in differing
    assert all(k.startswith("data/") for k in differing), differing


def make_run(root: Path, run_id: str, files: dict[str, bytes]) -> RunRecord:
    run_dir = root / "runs" / "job" / run_id
    outputs = run_dir / "outputs"
    outputs.mkdir(parents=True)
    for relative, data in files.items():
        (outputs / relative).write_bytes(data)
    record = {
        "run_id": run_id,
        "status": "succeeded",
        "job": {},
        "fingerprint": {"hardware": {"hostname": "node1"}},
        "checkpoints": [d.to_json() for d in hashing.hash_outputs(outputs, [])],
    }
    return RunRecord(run_dir.resolve(), record)


def test_the_verdict_names_a_weight_that_differs_inside_a_model_zip(tmp_path: Path) -> None:
    zipped = {"model.zip": write_zip(tmp_path / "a.zip", sb3_members(weight_seed=0)).read_bytes()}
    same = {
        "model.zip": write_zip(
            tmp_path / "b.zip", sb3_members(weight_seed=0), when=(2031, 1, 1, 0, 0, 0)
        ).read_bytes()
    }
    other = {"model.zip": write_zip(tmp_path / "c.zip", sb3_members(weight_seed=1)).read_bytes()}
    a = make_run(tmp_path, "20261128T030000Z-aaaaaa", zipped)
    b = make_run(tmp_path, "20261128T030100Z-bbbbbb", same)
    c = make_run(tmp_path, "20261128T030200Z-cccccc", other)
    equal = compare.compare_runs([a, b])
    assert equal.grade == compare.REPRODUCED and not equal.differences, equal.sentence
    differing = compare.compare_runs([a, c])
    assert differing.grade == compare.NOT_REPRODUCIBLE
    (difference,) = differing.differences
    assert difference["checkpoint"] == "model.zip"
    assert difference["name"] == "policy.pth/mlp_extractor.policy_net.0.weight"
    assert difference["differing"] > 0 and difference["max_abs"] > 0  # read back from the member: its values
    assert not differing.value_differences


def test_a_tars_links_are_values_and_its_member_count_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ckpt.tar"
    with tarfile.open(path, "w") as archive:
        info = tarfile.TarInfo("config.json")
        info.size = len(b'{"lr": 0.1}')
        archive.addfile(info, io.BytesIO(b'{"lr": 0.1}'))
        link = tarfile.TarInfo("latest.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    assert format_of(path) == "tar"  # by the magic in its header, whatever its name
    moved = path.rename(tmp_path / "ckpt.bundle")
    assert load_values(moved) == {
        "config.json/lr": 0.1,
        "latest.json": {"member": "symbolic link to /etc/passwd"},
    }
    from reprobox.guest.hashing import _archive_members

    monkeypatch.setattr(_archive_members, "MAX_ARCHIVE_MEMBERS", 1)
    digest = hash_checkpoint(moved, relative_to=tmp_path)
    assert (
        digest.format == "file"
        and digest.note is not None
        and "more than the limit of 1 members" in digest.note
    )


def test_a_damaged_archive_is_compared_as_bytes_with_the_reason(tmp_path: Path) -> None:
    members = {"data": b'{"lr": 0.1}' * 100, "system_info.txt": b"- OS: Linux\n" * 100}
    whole = write_zip(tmp_path / "whole.zip", members).read_bytes()
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whole[: len(whole) // 2])
    digest = hash_checkpoint(cut, relative_to=tmp_path)
    assert digest.format == "file" and digest.note is not None and "not a readable zip archive" in digest.note
    with pytest.raises(UsageError, match="not a readable zip archive"):
        load_tensors(cut)
    gz = tmp_path / "bad.tar.gz"
    gz.write_bytes(b"\x1f\x8b\x08\x00garbage that is no gzip stream")
    digest = hash_checkpoint(gz, relative_to=tmp_path)
    assert digest.format == "file" and digest.note is not None and "not a readable tar archive" in digest.note


def test_a_member_name_the_file_system_refuses_refuses_the_archive(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "long.zip", {"x" * 300 + ".json": b"{}"})
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.format == "file" and digest.note is not None and "temporary folder" in digest.note
