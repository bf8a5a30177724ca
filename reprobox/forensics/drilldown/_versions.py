"""The first operation where two versions of the code computed something different.

Two versions are expected to run different operations (a moved line, an extra `clone`, a reordered
pair of independent ops): what matters is the first value one version computed that the other never
did in that step. Rows come from the same alignment as two runs of one version (name, module, input
shapes; source lines are not part of the key, since the change moves them), and a row diverges when
an operation wrote a tensor whose digest appears nowhere in the other version's step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reprobox.forensics.drilldown._align import Pair, align
from reprobox.forensics.drilldown._cause import first_operation
from reprobox.forensics.drilldown._elements import output_differences
from reprobox.forensics.drilldown._text import context_rows, module_text
from reprobox.records.oplog import OpEvent, OpLog

CODE = "code"  # the cause of a divergence between versions: the versions computed differently here


def first_changed_operation(log_a: OpLog, log_b: OpLog) -> dict[str, Any] | None:
    """The first operation of version B (or A) that produced a value the other version never did, at the
    earliest recorded step where one did; a differing batch is told as for two runs of one version."""
    for step in sorted(set(log_a.steps) & set(log_b.steps)):
        ops_a, ops_b = log_a.ops(step), log_b.ops(step)
        rows = list(align(ops_a, ops_b))
        index = _first_new_value(rows, _values(ops_a), _values(ops_b))
        if index is not None:
            return _describe(log_a, log_b, step, rows, index)
        if _batches_differ(log_a, log_b, step):  # the versions load other data: said as for two runs
            return first_operation(log_a, log_b)
    return None


def _values(ops: Sequence[OpEvent]) -> set[str]:
    return {arg.identity for op in ops for arg in (*op.inputs, *op.outputs) if arg.is_tensor}


def _new(op: OpEvent | None, other: set[str]) -> bool:
    return op is not None and any(out.is_tensor and out.identity not in other for out in op.outputs)


def _first_new_value(rows: Sequence[Pair], values_a: set[str], values_b: set[str]) -> int | None:
    return next(
        (i for i, row in enumerate(rows) if _new(row.a, values_b) or _new(row.b, values_a)),
        None,
    )


def _batches_differ(log_a: OpLog, log_b: OpLog, step: int) -> bool:
    batches = [[[x.identity for x in e.inputs] for e in log.of_kind("batch", step)] for log in (log_a, log_b)]
    return batches[0] != batches[1]


def _describe(log_a: OpLog, log_b: OpLog, step: int, rows: Sequence[Pair], index: int) -> dict[str, Any]:
    row = rows[index]
    op = row.b or row.a
    assert op is not None
    found: dict[str, Any] = {
        "name": op.op,
        "module": op.module,
        "module_class": op.module_class,
        "source": op.source,
        "source_a": row.a.source if row.a else None,
        "source_b": row.b.source if row.b else None,
        "phase": op.phase,
        "step": step,
        "cause": CODE,  # also in the data phase: the new version prepares the batch differently
        "explanation": _explanation(row),
        "rank": log_a.rank,
        "index": {"a": row.a.index if row.a else None, "b": row.b.index if row.b else None},
        "context": context_rows(rows, index),
        "time_ns": op.time_ns,
    }
    if row.a is not None and row.b is not None:
        found["outputs"] = output_differences(log_a, log_b, row.a, row.b)
    found["sentence"] = _sentence(found)
    return found


def _explanation(row: Pair) -> str:
    if row.a is not None and row.b is not None:
        same_inputs = [x.identity for x in row.a.inputs] == [x.identity for x in row.b.inputs]
        return (
            "both versions ran it on equal inputs and its results differ"
            if same_inputs
            else "both versions ran it, on different inputs: the code feeds it differently"
        )
    return "only version A ran it" if row.b is None else "only version B ran it"


def _sentence(found: dict[str, Any]) -> str:
    module = module_text(found["module"], found["module_class"])
    where = f"in `{module}`" if found["module"] or found["module_class"] else module
    source = found.get("source_b") or found.get("source_a")
    at = f" at {source}" if source else ""
    return (
        f"`{found['name']}` {where}{at} during {found['phase'] or '?'} at step "
        f"{found['step']}: {found['explanation']}"
    )
