"""compare tells a torch Distributed Checkpoint saved in another layout (a reshard) from a change of numbers.

Each run saves with ``torch.distributed.checkpoint.save`` itself: one process, or two gloo ranks (forked)
saving the same tensors as DTensors sharded over them. The OS entropy every process draws is recorded in
the run's facts as the guest records it, so the save ids are excused by the runs' own draws.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh

from reprobox import compare
from reprobox.forensics.variation.matrix import SENSITIVE, FactorResult, judge
from reprobox.guest.hashing import _bounds
from reprobox.render import terminal
from reprobox.runspecific._drawn import RANDOM_ID
from tests.unit.test_dcp_reader import WEIGHT, save, state
from tests.unit.test_verdicts import two_runs

Writer = Callable[[Path, int], None]

REAL_URANDOM = os.urandom
CHANGED = WEIGHT.clone()
CHANGED[4, 1] += 1
TWO_RANK_SAVES = {
    "two": (WEIGHT, 5),
    "two-again": (WEIGHT, 5),
    "changed": (CHANGED, 5),
    "step-6": (WEIGHT, 6),
}
"""Saves by two ranks: the state's weight and step (see ``state``)."""


def _recording(where: Path) -> None:
    """From now on, write every os.urandom draw of this process (uuid4's too) to ``where``."""

    def urandom(n: int) -> bytes:
        data = REAL_URANDOM(n)
        with where.open("a") as drawn:
            drawn.write(data.hex() + "\n")
        return data

    os.urandom = urandom


def _two_ranks(rank: int, init: str, folder: str) -> None:
    """Every save of TWO_RANK_SAVES, each as DTensors sharded over both ranks, into ``folder/<name>``."""
    dist.init_process_group("gloo", init_method=init, world_size=2, rank=rank)
    mesh = init_device_mesh("cpu", (2,))
    for name, (weight, step) in TWO_RANK_SAVES.items():
        sharded = {
            "model": {
                "weight": distribute_tensor(weight, mesh, [Shard(0)]),
                "bias": distribute_tensor(torch.ones(4), mesh, [Shard(0)]),
            },
            "step": step,
            "tag": "run",
        }
        os.chdir(Path(folder) / name)  # each save records the same relative checkpoint_id
        _recording(Path(f"draws-{rank}.txt"))
        dcp.save(sharded, checkpoint_id="ckpt")
        os.urandom = REAL_URANDOM
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def saves(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``one``: the state saved by one process; the others (TWO_RANK_SAVES) by two gloo ranks forked once.
    Each folder holds ``ckpt/`` and the draws of every process that saved it (``draws-<rank>.txt``)."""
    folder = tmp_path_factory.mktemp("saves")
    for name in ["one", *TWO_RANK_SAVES]:
        (folder / name).mkdir()
    here = Path.cwd()
    os.chdir(folder / "one")
    try:
        _recording(Path("draws-0.txt"))
        save(Path("ckpt"), state())
    finally:
        os.urandom = REAL_URANDOM
        os.chdir(here)
    rendezvous = f"file://{folder / 'rendezvous'}"
    mp.start_processes(_two_ranks, args=(rendezvous, str(folder)), nprocs=2, start_method="fork")
    return folder


def saving(saves: Path, names: tuple[str, str], facts: tuple[dict[str, Any], dict[str, Any]]) -> Writer:
    """Run ``run`` writes the save ``names[run]``, and its facts hold the draws of the processes that
    saved it, as the guest records a run's draws."""

    def write(out: Path, run: int) -> None:
        shutil.copytree(saves / names[run] / "ckpt", out / "ckpt")
        draws = facts[run].setdefault("readings", {}).setdefault("draws", [])
        for drawn in sorted((saves / names[run]).glob("draws-*.txt")):
            draws += drawn.read_text().split()

    return write


def shards(result: compare.Comparison) -> dict[str, str]:
    return {row["path"]: row["status"] for row in result.checkpoints}


def compared(tmp_path: Path, saves: Path, names: tuple[str, str], **kwargs: Any) -> compare.Comparison:
    facts: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    write = kwargs.pop("write", None)
    save = saving(saves, names, facts)
    return two_runs(tmp_path, save if write is None else lambda out, run: write(save, out, run), facts=facts)


def test_the_same_tensors_saved_by_one_and_two_ranks_reproduce_as_a_reshard(
    tmp_path: Path, saves: Path
) -> None:
    result = compared(tmp_path, saves, ("one", "two"))
    assert (result.verdict, result.grade) == (compare.IDENTICAL, compare.REPRODUCED), result.sentence
    assert result.sentence == (
        "reproduced: every tensor and value is equal across 2 runs, except 1 run-specific value (listed), "
        "the layout of ckpt (resharded: 1 shard, 2 chunks vs 2 shards, 4 chunks)"
    )
    assert [(e["name"], e["reason"]) for e in result.run_specific] == [("storage_meta.save_id", RANDOM_ID)]
    assert result.differences == result.value_differences == result.one_sided == []
    assert result.notes == []
    (entry,) = result.resharded
    assert (entry["checkpoint"], entry["tensors"], entry["values"]) == ("ckpt", 2, 2)
    assert entry["differing_tensors"] == entry["differing_values"] == 0
    assert (entry["a"]["shards"], entry["b"]["shards"]) == (
        ["__0_0.distcp"],
        ["__0_0.distcp", "__1_0.distcp"],
    )
    assert shards(result) == {
        "ckpt/.metadata": "resharded",
        "ckpt/__0_0.distcp": "resharded",
        "ckpt/__1_0.distcp": "resharded",  # written by the second run alone
    }
    assert json.loads(json.dumps(result.to_json()))["resharded"] == [entry]
    text = terminal.comparison_text(result)
    assert "[resharded] ckpt/__1_0.distcp" in text and "cut into other shards" in text


def test_a_factor_that_reshards_the_checkpoint_is_sensitive_in_bytes_not_tensors(
    tmp_path: Path, saves: Path
) -> None:
    """verify --vary (world size): the same numbers, another layout; the matrix says so, never invariant."""
    row = judge(FactorResult("world_size", "", "1 vs 2"), compared(tmp_path, saves, ("one", "two")))
    assert (row.status, row.files, row.tensors) == (SENSITIVE, ["ckpt/.metadata"], [])
    assert "resharded" in row.note


def test_a_changed_weight_in_a_resharded_checkpoint_is_named_by_its_fqn(tmp_path: Path, saves: Path) -> None:
    result = compared(tmp_path, saves, ("one", "changed"))
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert result.sentence == (
        "not reproducible: 1 tensor differs (first: model.weight in ckpt/.metadata); "
        "ckpt (resharded: 1 shard, 2 chunks vs 2 shards, 4 chunks) too"
    )
    assert [(d["checkpoint"], d["name"]) for d in result.differences] == [("ckpt/.metadata", "model.weight")]
    assert result.differing_tensor_total == 1  # model.bias is equal: its chunks differ only in the cut
    assert result.value_differences == []
    assert result.resharded[0]["differing_tensors"] == 1
    assert shards(result) == {  # the shards hold the differing numbers: no "same tensors" mark on them
        "ckpt/.metadata": "differs",
        "ckpt/__0_0.distcp": "differs",
        "ckpt/__1_0.distcp": "missing",
    }


def test_a_value_that_moved_to_another_shard_and_changed_is_a_difference(tmp_path: Path, saves: Path) -> None:
    result = compared(tmp_path, saves, ("one", "step-6"))
    assert result.grade == compare.NOT_REPRODUCIBLE
    (value,) = result.value_differences
    assert (value["checkpoint"], value["name"], value["a"], value["b"]) == ("ckpt/__0_0.distcp", "step", 5, 6)
    assert value["note"] == "in ckpt/__0_0.distcp vs ckpt/__1_0.distcp (resharded)"
    assert result.sentence.startswith("not reproducible: step 5 vs 6 in ckpt/__0_0.distcp")
    assert result.differences == []


def test_two_saves_of_one_layout_are_no_reshard(tmp_path: Path, saves: Path) -> None:
    result = compared(tmp_path, saves, ("two", "two-again"))
    assert result.grade == compare.REPRODUCED and result.resharded == []
    assert set(shards(result).values()) == {"same", "run-specific"}


def test_a_tensor_not_assembled_leaves_the_chunks_differing(
    tmp_path: Path, saves: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its digest is not of the whole tensor: whether the numbers agree cannot be told, so no reshard."""
    monkeypatch.setattr(_bounds, "MAX_IN_MEMORY_BYTES", 32)  # the bias (16 bytes) fits, the weight not
    result = compared(tmp_path, saves, ("one", "two"))
    assert result.grade == compare.NOT_REPRODUCIBLE and result.resharded == []
    assert "model.weight@0,0" in {d["name"] for d in result.differences}
    assert "layout.chunks.model.weight" in {v["name"] for v in result.value_differences}


def test_bytes_no_reader_read_in_a_shard_of_one_run_are_no_reshard(tmp_path: Path, saves: Path) -> None:
    def write(save: Writer, out: Path, run: int) -> None:
        save(out, run)
        if run:
            with (out / "ckpt" / "__1_0.distcp").open("ab") as shard:
                shard.write(b"payload")

    result = compared(tmp_path, saves, ("one", "two"), write=write)
    assert result.grade == compare.NOT_REPRODUCIBLE and result.resharded == []
    assert any("__1_0.distcp exists only in" in note for note in result.notes)
