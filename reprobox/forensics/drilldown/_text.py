"""How a first diverging operation is told: the causes' names, the one-sentence answer, the aligned
operations around it (for the text, JSON and the report's table), and operations and arguments as text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reprobox.forensics.drilldown._align import Pair
from reprobox.records.oplog import Arg, OpEvent

# The causes, as `cause` names them (what each means: `reprobox.forensics.drilldown._cause`).
OPERATION, RNG, DATA, INPUT, PATH = "operation", "rng", "data", "input", "path"
CONTEXT_ROWS = 4  # rows shown on each side of the diverging operation


def context_rows(rows: Sequence[Pair], index: int) -> list[dict[str, Any]]:
    """The aligned operations around the divergence, for the text, JSON and the report's table."""
    chosen = []
    for position in range(max(0, index - CONTEXT_ROWS), min(len(rows), index + CONTEXT_ROWS + 1)):
        row = rows[position]
        op = row.a or row.b
        assert op is not None
        status = (
            "differs"
            if row.differs and row.matched
            else "equal"
            if row.matched
            else ("only in run A" if row.b is None else "only in run B")
        )
        chosen.append(
            {
                "a": row.a.index if row.a else None,
                "b": row.b.index if row.b else None,
                "op": op.op,
                "module": module_text(op.module, op.module_class),
                "phase": op.phase,
                "source": op.source,
                **_moved_source(row),
                "inputs": ", ".join(x.describe() for x in op.inputs),
                "outputs": ", ".join(x.describe() for x in op.outputs),
                "status": status,
                "diverges": position == index,
            }
        )
    return chosen


def _moved_source(row: Pair) -> dict[str, str]:
    """B's own line where it differs from A's (two versions of the code: the change moved it)."""
    if row.a is not None and row.b is not None and row.a.source != row.b.source:
        return {"source_b": row.b.source}
    return {}


def module_text(module: str, module_class: str) -> str:
    if module:
        return module
    return f"{module_class} (outermost module)" if module_class else "outside any module"


def arg_text(arg: Arg) -> str:
    return f"{arg.describe()} {arg.digest[:16]}" if arg.is_tensor and arg.digest else str(arg.value)


def op_text(op: OpEvent) -> str:
    where = f" ({op.source})" if op.source else ""
    module = module_text(op.module, op.module_class)
    return f"`{op.op}` {f'in `{module}`' if op.module or op.module_class else module}{where}"


def path_text(row: Pair) -> str:
    if row.a is not None:
        return f"only run A ran {op_text(row.a)} here"
    assert row.b is not None
    return f"only run B ran {op_text(row.b)} here"


def sentence(found: dict[str, Any]) -> str:
    """The first line of the answer: what, where, when, why."""
    step, cause = found["step"], found["cause"]
    module = module_text(found["module"], found["module_class"])
    where = f"in `{module}`" if found["module"] or found["module_class"] else module
    source = f" ({found['source']})" if found.get("source") else ""
    phase = found.get("phase") or "?"
    name = f"`{found['name']}`"
    if cause == DATA:
        batch = found.get("batch")
        which = f" (batch {batch} of the epoch)" if isinstance(batch, int) else ""
        first = f"; first seen in {name}{source}" if found.get("name") else ""
        return f"batch differs at step {step}{which}: data order or augmentation{first}"
    if cause == OPERATION:
        outputs = found.get("outputs") or []
        counted = next((o for o in outputs if "differing_elements" in o), None)
        how = "outputs differ"
        if counted is not None:
            how += f" in {counted['differing_elements']} of {counted['elements']} elements"
            if counted.get("max_abs") is not None:
                how += f" (max {counted['max_abs']:.3g})"
        return (
            f"nondeterministic operation {name} {where}{source} during {phase} at step {step}; "
            f"inputs equal, {how}: {found['explanation']}"
        )
    if cause == RNG:
        return (
            f"random draw {name} {where}{source} during {phase} at step {step} differs: "
            f"{found['explanation']}"
        )
    if cause == PATH:
        return f"the runs took different paths at step {step} during {phase}: {found['explanation']}"
    return (
        f"an input from outside the recorded operations differs at step {step}: {name} {where}{source} "
        f"during {phase} reads it; {found['explanation']}"
    )
