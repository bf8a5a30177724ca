"""A torch Distributed Checkpoint folder is read as one: its index, its shards item by item, each tensor
assembled by its fqn.

Checkpoints are written by ``torch.distributed.checkpoint.save`` itself (one process, or two gloo ranks
saving a sharded DTensor), hashed by the guest's real hashing and compared as runs are.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh

from reprobox import compare
from reprobox.errors import UsageError
from reprobox.guest.hashing import _bounds, _dcp, _readers
from reprobox.guest.hashing._layout import unaccounted_of
from reprobox.runspecific._drawn import RANDOM_ID
from tests.unit.test_verdicts import two_runs

WEIGHT = torch.arange(24.0).reshape(6, 4)


def state(weight: torch.Tensor = WEIGHT) -> dict[str, Any]:
    return {"model": {"weight": weight.clone(), "bias": torch.ones(4)}, "step": 5, "tag": "run"}


def save(folder: Path, state_dict: dict[str, Any]) -> None:
    """One process's save (no process group: DCP warns that it saves alone)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dcp.save(state_dict, checkpoint_id=folder)


@pytest.fixture
def in_outputs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], None]]:
    """Saves from inside the outputs folder, so the checkpoint_id each save records is the same."""
    yield monkeypatch.chdir


def drawing(facts: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Record every os.urandom draw (uuid4's too) in ``facts`` as the guest records a run's draws."""
    real = os.urandom
    draws: list[str] = facts.setdefault("readings", {}).setdefault("draws", [])

    def urandom(n: int) -> bytes:
        data = real(n)
        draws.append(data.hex())
        return data

    monkeypatch.setattr(os, "urandom", urandom)


def writer(
    chdir: Callable[[Path], None],
    monkeypatch: pytest.MonkeyPatch,
    facts: tuple[dict[str, Any], dict[str, Any]] | None,
    state_of: Callable[[int], dict[str, Any]] = lambda _run: state(),
) -> Callable[[Path, int], None]:
    def write(out: Path, run: int) -> None:
        chdir(out)
        if facts is not None:
            drawing(facts[run], monkeypatch)
        save(Path("ckpt"), state_of(run))
        monkeypatch.undo()

    return write


def test_two_saves_reproduce_with_the_save_id_excused_by_the_runs_draws(
    tmp_path: Path, in_outputs: Callable[[Path], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    facts: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    result = two_runs(tmp_path, writer(in_outputs, monkeypatch, facts), facts=facts)
    assert (result.verdict, result.grade) == (compare.IDENTICAL, compare.REPRODUCED)
    assert [(e["checkpoint"], e["name"], e["reason"]) for e in result.run_specific] == [
        ("ckpt/.metadata", "storage_meta.save_id", RANDOM_ID)
    ]


def test_a_checkpoint_id_under_each_runs_own_folder_is_excused_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dcp.save(..., checkpoint_id=<outputs>/ckpt)`` records a pathlib path: read as the path it names,
    each run's own folder in it is recognised as in any path value."""
    facts: tuple[dict[str, Any], dict[str, Any]] = ({}, {})

    def write(out: Path, run: int) -> None:
        drawing(facts[run], monkeypatch)
        save(out / "ckpt", state())
        monkeypatch.undo()

    result = two_runs(tmp_path, write, facts=facts)
    assert (result.verdict, result.grade) == (compare.IDENTICAL, compare.REPRODUCED)
    assert sorted((e["name"], e["reason"]) for e in result.run_specific) == [
        ("storage_meta.checkpoint_id", "a path under the run's own directory"),
        ("storage_meta.save_id", RANDOM_ID),
    ]


def test_without_a_record_the_save_id_is_a_value_difference_not_a_tensor_one(
    tmp_path: Path, in_outputs: Callable[[Path], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = two_runs(tmp_path, writer(in_outputs, monkeypatch, None))
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert [(e["checkpoint"], e["name"]) for e in result.value_differences] == [
        ("ckpt/.metadata", "storage_meta.save_id")
    ]
    assert result.differences == []


def test_one_changed_weight_is_named_by_its_fqn(
    tmp_path: Path, in_outputs: Callable[[Path], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    changed = WEIGHT.clone()
    changed[4, 1] += 1

    facts: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    write = writer(in_outputs, monkeypatch, facts, lambda run: state([WEIGHT, changed][run]))
    result = two_runs(tmp_path, write, facts=facts)
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert [(d["checkpoint"], d["name"]) for d in result.differences] == [
        ("ckpt/__0_0.distcp", "model.weight@0,0")
    ]
    assert result.differences[0]["differing"] == 1
    assert [e["name"] for e in result.value_differences] == ["model.weight"]  # the assembled tensor


def test_bytes_appended_to_a_shard_are_never_excused(
    tmp_path: Path, in_outputs: Callable[[Path], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    facts: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    save_one = writer(in_outputs, monkeypatch, facts)

    def write(out: Path, run: int) -> None:
        save_one(out, run)
        with (out / "ckpt" / "__0_0.distcp").open("ab") as shard:
            shard.write(b"payload" if run else b"")

    result = two_runs(tmp_path, write, facts=facts)
    assert result.grade != compare.REPRODUCED and result.verdict == compare.DIFFERENT
    shard = next(tmp_path.glob("runs/job/*bbbbbb/outputs/ckpt/__0_0.distcp"))
    content = _readers.plan(shard)
    assert content.layout is not None
    size = shard.stat().st_size
    assert unaccounted_of(shard, content.layout).ranges == ((size - 7, size),)


def test_a_shard_and_its_index_account_for_every_byte(tmp_path: Path) -> None:
    save(tmp_path / "ckpt", state())
    for path in (tmp_path / "ckpt").iterdir():
        content = _readers.plan(path)
        assert content.format == "dcp" and content.layout is not None, path
        assert unaccounted_of(path, content.layout).none, path
    shard = _readers.plan(tmp_path / "ckpt" / "__0_0.distcp")
    assert sorted(a.name for a in shard.arrays) == ["model.bias@0", "model.weight@0,0"]
    assert sorted(shard.metadata) == ["step", "tag"]
    tensors, values = _readers.load_tensors(tmp_path / "ckpt" / "__0_0.distcp")
    assert torch.equal(tensors["model.weight@0,0"], WEIGHT) and values == {"step": 5, "tag": "run"}


WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None  # the guest reads and hashes without torch
from pathlib import Path
from reprobox.guest.hashing import _readers
print(_readers.load_values(Path(sys.argv[1]))["model.weight"])
"""


def test_the_guest_reads_a_checkpoint_without_torch(tmp_path: Path) -> None:
    save(tmp_path / "ckpt", state())
    index = tmp_path / "ckpt" / ".metadata"
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, str(index)], capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "sha256:" + sha256(WEIGHT.numpy().tobytes()).hexdigest()


def test_a_tensor_too_large_to_assemble_is_named_so_and_its_chunks_still_hashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(tmp_path / "ckpt", state())
    monkeypatch.setattr(_bounds, "MAX_IN_MEMORY_BYTES", 32)  # the bias (16 bytes) fits, the weight not
    values = _readers.load_values(tmp_path / "ckpt" / ".metadata")
    assert str(values["model.weight"]).startswith("not assembled (the assembled tensor would take 96 bytes")
    assert values["model.bias"] == "sha256:" + sha256(torch.ones(4).numpy().tobytes()).hexdigest()
    shard = _readers.plan(tmp_path / "ckpt" / "__0_0.distcp")
    assert sorted(a.name for a in shard.arrays) == ["model.bias@0", "model.weight@0,0"]


def test_a_shard_its_index_lists_nothing_in_is_one_gap(tmp_path: Path) -> None:
    save(tmp_path / "ckpt", state())
    stale = tmp_path / "ckpt" / "__1_0.distcp"  # left by an earlier save of two ranks
    stale.write_bytes((tmp_path / "ckpt" / "__0_0.distcp").read_bytes())
    content = _readers.plan(stale)
    assert content.layout is not None and content.arrays == []
    assert unaccounted_of(stale, content.layout).ranges == ((0, stale.stat().st_size),)


def test_a_shard_without_its_index_is_compared_by_its_bytes(tmp_path: Path) -> None:
    save(tmp_path / "ckpt", state())
    (tmp_path / "ckpt" / ".metadata").unlink()
    content = _readers.plan(tmp_path / "ckpt" / "__0_0.distcp")
    assert (content.format, content.layout) == ("file", None)
    assert content.note is not None and "no .metadata beside it" in content.note


class _Call:
    """Pickles as a call of ``os.getcwd``: a global that is not DCP's."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.getcwd, ())


def _hostile(metadata: Any, how: str) -> None:
    if how == "global":
        metadata.planner_data = _Call()
    elif how == "path":
        key = next(k for k in metadata.storage_data if k.fqn == "model.weight")
        metadata.storage_data[key] = _StorageInfo("../__0_0.distcp", 0, 10)
    elif how == "size":
        metadata.state_dict_metadata["model.weight"].size = torch.Size([1 << 40, 1 << 40])
    else:
        key = next(k for k in metadata.storage_data if k.fqn == "model.weight")
        metadata.storage_data[key] = _StorageInfo("__0_0.distcp", 1 << 30, 10)


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("global", "it names 'posix.getcwd', which is not a class of a DCP index"),
        ("size", "declares a shape over the limit"),
        ("offset", "item 'model.weight' reaches past the end of shard __0_0.distcp"),
        ("path", "item 'model.weight' names a shard that is not a .distcp file beside the index"),
    ],
)
def test_a_hostile_index_is_refused_in_one_sentence(tmp_path: Path, how: str, reason: str) -> None:
    folder = tmp_path / "ckpt"
    save(folder, state())
    index = folder / ".metadata"
    metadata = pickle.loads(index.read_bytes())
    _hostile(metadata, how)
    index.write_bytes(pickle.dumps(metadata))
    content = _readers.plan(index)
    assert content.format == "file" and content.note is not None
    assert reason in content.note
    assert _readers.plan(folder / "__0_0.distcp").format == "file"  # its items cannot be placed
    with pytest.raises(UsageError) as raised:
        _readers.load_tensors(index)
    message = str(raised.value)
    assert message.startswith(str(index)) and reason in message and "\n" not in message


def _rank(rank: int, init: str, folder: str) -> None:
    dist.init_process_group("gloo", init_method=init, world_size=2, rank=rank)
    mesh = init_device_mesh("cpu", (2,))
    sharded = {
        "model": {
            "weight": distribute_tensor(WEIGHT, mesh, [Shard(0)]),
            "bias": distribute_tensor(torch.ones(4), mesh, [Shard(0)]),
        },
        "step": 5,
        "tag": "run",
    }
    dcp.save(sharded, checkpoint_id=folder)
    dist.destroy_process_group()


def test_the_same_weights_saved_by_one_or_two_ranks_differ_only_in_layout(tmp_path: Path) -> None:
    save(tmp_path / "one", state())
    mp.start_processes(
        _rank,
        args=(f"file://{tmp_path / 'rendezvous'}", str(tmp_path / "two")),
        nprocs=2,
        start_method="fork",
    )
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == [
        ".metadata",
        "__0_0.distcp",
        "__1_0.distcp",
    ]
    one = _readers.load_values(tmp_path / "one" / ".metadata")
    two = _readers.load_values(tmp_path / "two" / ".metadata")
    differing = {name for name in one.keys() | two.keys() if one.get(name) != two.get(name)}
    assert {name for name in differing if not name.startswith("layout.")} == {
        "storage_meta.save_id",
        "storage_meta.checkpoint_id",  # each save's own folder, a pathlib path read as the path it names
    }
    assert (one["storage_meta.checkpoint_id"], two["storage_meta.checkpoint_id"]) == (
        str(tmp_path / "one"),
        str(tmp_path / "two"),
    )
    assert (
        one["model.weight"] == two["model.weight"] == "sha256:" + sha256(WEIGHT.numpy().tobytes()).hexdigest()
    )
    assert two["layout.chunks.model.weight"] == [
        {"offsets": [0, 0], "sizes": [3, 4]},
        {"offsets": [3, 0], "sizes": [3, 4]},
    ]
    second = _readers.plan(tmp_path / "two" / "__1_0.distcp")
    assert [a.name for a in second.arrays] == ["model.weight@3,0", "model.bias@2"]


def test_the_index_is_read_once_for_the_folder_and_charged_to_each_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shard reuses the index the .metadata read, and its budget is spent as if it had read it."""
    save(tmp_path / "ckpt", state())
    index = tmp_path / "ckpt" / ".metadata"
    reads = []
    read = _dcp._read_index

    def slow_read(path: Path) -> Any:
        reads.append(path)
        started = time.thread_time()
        while time.thread_time() - started < 0.3:  # the CPU time a large index takes
            pass
        return read(path)

    monkeypatch.setattr(_dcp, "_read_index", slow_read)
    assert _readers.plan(index).format == _readers.plan(tmp_path / "ckpt" / "__0_0.distcp").format == "dcp"
    assert len(reads) == 1
    with _bounds.cpu_budget():
        _dcp.read_index(index)
        left = _bounds._FILE_DEADLINE.get() - time.thread_time()  # type: ignore[operator]
    assert len(reads) == 1 and left < _bounds.FILE_CPU_SECONDS - 0.3  # charged, not read again
    assert "model.weight" in _readers.load_values(index)  # comparison, within no budget, reads it anew
    assert len(reads) == 2
