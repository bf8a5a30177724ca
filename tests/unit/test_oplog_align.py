"""Operation logs read back and aligned: unequal lengths, path changes, the values that enter a step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reprobox.errors import SpecError
from reprobox.forensics.drilldown import analyze, first_operation
from reprobox.forensics.drilldown._align import align
from reprobox.records.oplog import OPLOG_DIR, OPLOG_SCHEMA, encode_line, read_oplogs


def tensor(digest: str, tag: str | None = None) -> dict[str, Any]:
    arg: dict[str, Any] = {"d": digest, "shape": [4], "dtype": "float32"}
    if tag:
        arg["tag"] = tag
    return arg


def op(
    i: int, name: str, ins: list[dict[str, Any]], outs: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    line = {"step": 3, "i": i, "op": name, "phase": "forward", "module": "fc", "class": "Linear"}
    return {**line, "source": f"train.py:{10 + i}", "in": ins, "out": outs, "t": i, **extra}


def write_log(run_dir: Path, lines: list[dict[str, Any]], *, extra: str = "", rank: int = 0) -> Path:
    folder = run_dir / OPLOG_DIR
    folder.mkdir(parents=True, exist_ok=True)
    header = {"schema": OPLOG_SCHEMA, "rank": rank, "steps": [3], "threads": 2}
    text = "".join(encode_line(line) for line in [header, *lines]) + extra
    (folder / f"rank{rank}.jsonl").write_text(text)
    return run_dir


def logs(tmp_path: Path, a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[Any, Any]:
    return read_oplogs(write_log(tmp_path / "a", a))[0], read_oplogs(write_log(tmp_path / "b", b))[0]


def test_an_extra_operation_in_one_run_is_its_own_row(tmp_path: Path) -> None:
    common = [
        op(0, "aten::mm", [tensor("x")], [tensor("y")]),
        op(1, "aten::relu", [tensor("y")], [tensor("z")]),
    ]
    extra = op(1, "aten::mul", [tensor("y")], [tensor("y2")])
    tail = op(2, "aten::relu", [tensor("y")], [tensor("z")])
    a, b = logs(tmp_path, common, [common[0], extra, tail])
    rows = list(align(a.ops(3), b.ops(3)))
    assert [(r.a.op if r.a else None, r.b.op if r.b else None) for r in rows] == [
        ("aten::mm", "aten::mm"),
        (None, "aten::mul"),
        ("aten::relu", "aten::relu"),
    ]
    found = first_operation(a, b)
    assert found is not None and found["cause"] == "path" and found["name"] == "aten::mul"
    assert found["sentence"].startswith("the runs took different paths at step 3")


def test_equal_inputs_and_differing_output_is_the_operation(tmp_path: Path) -> None:
    first = op(0, "aten::mm", [tensor("x")], [tensor("y")])
    a, b = logs(
        tmp_path,
        [first, op(1, "aten::index_add_", [tensor("y")], [tensor("p")])],
        [first, op(1, "aten::index_add_", [tensor("y")], [tensor("q")])],
    )
    found = first_operation(a, b)
    assert found is not None
    assert (found["cause"], found["name"], found["module"], found["source"]) == (
        "operation",
        "aten::index_add_",
        "fc",
        "train.py:11",
    )


def test_a_parameter_that_differs_when_the_step_starts_is_an_input(tmp_path: Path) -> None:
    a, b = logs(
        tmp_path,
        [op(0, "aten::t", [tensor("w1", "param:fc.weight")], [tensor("t1")])],
        [op(0, "aten::t", [tensor("w2", "param:fc.weight")], [tensor("t2")])],
    )
    found = first_operation(a, b)
    assert found is not None and found["cause"] == "input"
    assert "parameter fc.weight already differs when step 3 starts" in found["explanation"]


def test_a_differing_generator_state_is_rng(tmp_path: Path) -> None:
    a, b = logs(
        tmp_path,
        [op(0, "aten::bernoulli_", [tensor("u")], [tensor("m1")], rng="s1")],
        [op(0, "aten::bernoulli_", [tensor("u")], [tensor("m2")], rng="s2")],
    )
    found = first_operation(a, b)
    assert found is not None and found["cause"] == "rng"


def test_equal_logs_explain_nothing_and_torn_lines_are_skipped(tmp_path: Path) -> None:
    same = [op(0, "aten::mm", [tensor("x")], [tensor("y")])]
    a = read_oplogs(write_log(tmp_path / "a", same, extra='{"step": 3, "i": 1, "op": "aten::m'))[0]
    b = read_oplogs(write_log(tmp_path / "b", same))[0]
    assert a.skipped == 1 and first_operation(a, b) is None


def test_a_log_of_another_version_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / OPLOG_DIR
    folder.mkdir()
    (folder / "rank0.jsonl").write_text('{"schema": "reprobox.oplog/9"}\n')
    with pytest.raises(SpecError, match="does not read"):
        read_oplogs(tmp_path)


def test_the_rank_that_diverged_first_is_named(tmp_path: Path) -> None:
    """Rank 1's gradient differs first; rank 0 sees it only through the all-reduce, later."""
    for run, value in (("a", "g1"), ("b", "g2")):
        rank0 = [
            op(0, "aten::mm", [tensor("x")], [tensor("y")]),
            op(1, "c10d::allreduce_", [tensor("y")], [tensor(f"sum-{value}")], t=900),
        ]
        rank1 = [op(0, "aten::add", [tensor("x"), {"v": value}], [tensor(value)], t=500)]
        write_log(tmp_path / run, rank0, rank=0)
        write_log(tmp_path / run, rank1, rank=1)
    found, ranks = analyze(tmp_path / "a", tmp_path / "b")
    assert found is not None and found["rank"] == 1 and set(ranks) == {"0", "1"}
    assert found["sentence"].startswith("rank 1 diverged first:")
    assert found["cause"] == "input" and "time_ns" not in found


@pytest.mark.parametrize(
    ("digest", "atomics"), [("dev:00ab:4", True), ("3f2a", False)], ids=["on a GPU", "on the CPU"]
)
def test_a_scatter_sum_is_blamed_on_atomics_only_on_a_gpu(tmp_path: Path, digest: str, atomics: bool) -> None:
    """index_add_ on a GPU adds with atomics; the same op on the CPU (where the process also had CUDA,
    as on any GPU machine) has no atomics to blame: the tensors' digests say where it ran."""
    ins = [tensor(digest), tensor(digest + "i")]
    a, b = logs(
        tmp_path,
        [op(0, "aten::index_add_", ins, [tensor(digest + "x")])],
        [op(0, "aten::index_add_", ins, [tensor(digest + "y")])],
    )
    a.header["cuda"] = b.header["cuda"] = True
    found = first_operation(a, b)
    assert found is not None and found["cause"] == "operation"
    assert ("atomic" in found["sentence"]) is atomics, found["sentence"]
