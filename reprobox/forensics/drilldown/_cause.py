"""From two aligned operation logs to the first diverging operation and its cause, in one sentence.

Causes: `operation` (every input equal, the result differs: the kernel is not deterministic), `rng` (a
random draw from a generator whose state already differed), `data` (the batch: data order or
augmentation), `input` (a value that entered the step from outside the recorded operations: a
parameter or optimizer state, a Python number, a tensor made from Python or NumPy data), and `path`
(the runs ran different operations before any value differed: a decision taken outside torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reprobox.forensics.drilldown._align import Pair, align, first_difference
from reprobox.records.oplog import Arg, OpEvent, OpLog, read_values

OPERATION, RNG, DATA, INPUT, PATH = "operation", "rng", "data", "input", "path"
DEVICE_DIGEST = "dev:"  # how a tensor's digest starts when it was computed on a GPU (guest/trail.py)
CONTEXT_ROWS = 4  # rows shown on each side of the diverging operation

# Kernels whose CUDA implementation accumulates with atomic adds (PyTorch's list of operations that
# torch.use_deterministic_algorithms(True) refuses or replaces), matched by name stem.
CUDA_ATOMIC_STEMS = (
    "index_add",
    "index_put",
    "_index_put_impl",
    "scatter_add",
    "scatter_reduce",
    "embedding_dense_backward",
    "_embedding_bag",
    "nll_loss2d_backward",
    "upsample_",
    "grid_sampler_2d_backward",
    "grid_sampler_3d_backward",
    "cumsum",
    "put_",
    "histc",
    "bincount",
    "ctc_loss_backward",
    "adaptive_avg_pool",
    "adaptive_max_pool",
    "avg_pool3d_backward",
    "max_pool3d_with_indices_backward",
    "reflection_pad",
    "replication_pad",
    "fractional_max_pool",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_flash_attention_backward",
    "_efficient_attention_backward",
    "_flash_attention_backward",
)


def first_operation(log_a: OpLog, log_b: OpLog) -> dict[str, Any] | None:
    """The first diverging operation of two runs' logs (earliest recorded step first), or None."""
    for step in sorted(set(log_a.steps) & set(log_b.steps)):
        rows = list(align(log_a.ops(step), log_b.ops(step)))
        index = first_difference(rows)
        if index is not None:
            return _describe(log_a, log_b, step, rows, index)
        batch = _first_differing_batch(log_a, log_b, step)
        if batch is not None:  # a batch that no recorded operation read (none did, yet)
            return _batch_only(step, batch)
    return None


def _describe(log_a: OpLog, log_b: OpLog, step: int, rows: Sequence[Pair], index: int) -> dict[str, Any]:
    row = rows[index]
    a = row.a or row.b
    assert a is not None
    cause, explanation, detail = _cause(log_a, log_b, step, rows, index)
    batch = _first_differing_batch(log_a, log_b, step) if cause == DATA else None
    found: dict[str, Any] = {
        "name": a.op,
        "module": a.module,
        "module_class": a.module_class,
        "source": a.source,
        "phase": a.phase,
        "step": step,
        "cause": cause,
        "explanation": explanation,
        "rank": log_a.rank,
        "index": {"a": row.a.index if row.a else None, "b": row.b.index if row.b else None},
        "digests": {
            "a": _digests(row.a) if row.a else None,
            "b": _digests(row.b) if row.b else None,
        },
        "context": context_rows(rows, index),
        "time_ns": a.time_ns,
        **detail,
    }
    if batch is not None:
        found["batch"] = batch
    found["sentence"] = sentence(found)
    return found


def _cause(
    log_a: OpLog, log_b: OpLog, step: int, rows: Sequence[Pair], index: int
) -> tuple[str, str, dict[str, Any]]:
    row = rows[index]
    if not row.matched:
        only = row.a or row.b
        if only is not None and only.rng is not None:
            run = "A" if row.a is not None else "B"
            return (
                RNG,
                (
                    f"only run {run} drew from the random generator here, so every later draw "
                    "(dropout masks, sampling) differs"
                ),
                {},
            )
        return PATH, _path_text(row), {}
    a, b = row.a, row.b
    assert a is not None and b is not None
    differing_inputs = _differing(a.inputs, b.inputs)
    if not differing_inputs:
        return _equal_inputs_cause(log_a, log_b, step, a, b)
    return _outside_input_cause(log_a, step, rows, index, differing_inputs[0])


def _equal_inputs_cause(
    log_a: OpLog, log_b: OpLog, step: int, a: OpEvent, b: OpEvent
) -> tuple[str, str, dict[str, Any]]:
    """Every input equal, a result not: the data, a draw from a differing generator, or the kernel."""
    detail = {"inputs_equal": True, "outputs": _output_differences(log_a, log_b, a, b)}
    if a.phase == "data" or _reaches_model_input(log_a, step, a, [x.identity for x in a.outputs]):
        return DATA, "the batch differs: data order or augmentation", detail
    if a.rng is not None and a.rng != b.rng:
        return (
            RNG,
            (
                "the random generator's state already differed before this draw: something drew from it, "
                "or seeded it, differently in the two runs"
            ),
            detail,
        )
    return OPERATION, _known_explanation(log_a, log_b, a), detail


def _outside_input_cause(
    log_a: OpLog, step: int, rows: Sequence[Pair], index: int, position: int
) -> tuple[str, str, dict[str, Any]]:
    """An input differs although every earlier operation agreed: it entered the step from outside."""
    a, b = rows[index].a, rows[index].b
    assert a is not None and b is not None
    x, y = a.inputs[position], b.inputs[position]
    detail = {
        "inputs_equal": False,
        "input": {"position": position, "a": _arg_text(x), "b": _arg_text(y), "tag": x.tag},
    }
    made_by = _made_on_other_path(rows, index, x)
    if made_by is not None:
        return PATH, f"this input was made by an operation only run A ran: {_op_text(made_by)}", detail
    if a.phase == "data" or _is_batch(log_a, step, x) or _reaches_model_input(log_a, step, a, [x.identity]):
        return DATA, "the batch differs: data order or augmentation", detail
    if not x.is_tensor:
        return (
            INPUT,
            (f"argument {position} is a Python value computed outside torch ({x.value} vs {y.value})"),
            detail,
        )
    if x.tag and x.tag.startswith(("param:", "buffer:")):
        kind, _, name = x.tag.partition(":")
        what = "parameter" if kind == "param" else "buffer"
        return (
            INPUT,
            (
                f"{what} {name} already differs when step {step} starts: it was changed outside torch's "
                "operations (in place through .data or NumPy) or loaded from elsewhere"
            ),
            detail,
        )
    if x.tag and x.tag.startswith("optim:"):
        name = x.tag.removeprefix("optim:")
        return INPUT, f"optimizer state {name} already differs when step {step} starts", detail
    world = int(log_a.header.get("world") or 1)
    sent = ", or sent by another rank through a collective" if world > 1 else ""
    return (
        INPUT,
        (
            "a tensor made outside the recorded operations (from Python or NumPy values, or written through "
            f".numpy(){sent}) differs"
        ),
        detail,
    )


def _differing(xs: Sequence[Arg], ys: Sequence[Arg]) -> list[int]:
    if len(xs) != len(ys):
        return list(range(min(len(xs), len(ys)), max(len(xs), len(ys))))
    return [i for i, (x, y) in enumerate(zip(xs, ys, strict=True)) if x.identity != y.identity]


def _reaches_model_input(log: OpLog, step: int, op: OpEvent, start: list[str]) -> bool:
    """Whether a value the op read or wrote flows, through the step's later operations, into a batch
    a DataLoader yielded or into the outermost module's input: then the data differ."""
    tainted = set(start)
    seen = False
    for event in log.events:
        if event.step != step:
            continue
        if event is op:
            seen = True
            continue
        if not seen:
            continue
        if event.kind == "op":
            if any(x.identity in tainted for x in event.inputs):
                tainted.update(x.identity for x in event.outputs)
        elif any(x.identity in tainted for x in event.inputs):
            return True
    return False


def _is_batch(log: OpLog, step: int, arg: Arg) -> bool:
    """Whether the value is (part of) a batch a DataLoader yielded or the outermost module's input."""
    return any(
        x.identity == arg.identity
        for event in log.events
        if event.step == step and event.kind in ("batch", "model_input")
        for x in event.inputs
    )


def _made_on_other_path(rows: Sequence[Pair], index: int, arg: Arg) -> OpEvent | None:
    """The operation that only run A ran and whose result is this input, if one is."""
    for row in rows[:index]:
        if row.b is None and row.a is not None and any(o.identity == arg.identity for o in row.a.outputs):
            return row.a
    return None


def _output_differences(log_a: OpLog, log_b: OpLog, a: OpEvent, b: OpEvent) -> list[dict[str, Any]]:
    """For each result that differs: how many elements, and by how much (when its bytes were saved)."""
    found = []
    for position, (x, y) in enumerate(zip(a.outputs, b.outputs, strict=False)):
        if x.identity == y.identity:
            continue
        entry: dict[str, Any] = {"position": position, "a": _arg_text(x), "b": _arg_text(y)}
        entry.update(_elements(log_a, log_b, x, y))
        found.append(entry)
    return found


def _elements(log_a: OpLog, log_b: OpLog, x: Arg, y: Arg) -> dict[str, Any]:
    import numpy as np

    if not x.is_tensor or x.dtype != y.dtype or x.shape != y.shape:
        return {}
    raw_a, raw_b = read_values(log_a, x), read_values(log_b, y)
    if raw_a is None or raw_b is None or len(raw_a) != len(raw_b):
        return {}
    dtype = _numpy_dtype(x.dtype)
    if dtype is None:
        return {}
    values_a = _decode(np.frombuffer(raw_a, dtype=dtype), x.dtype)
    values_b = _decode(np.frombuffer(raw_b, dtype=dtype), x.dtype)
    bits_a, bits_b = np.frombuffer(raw_a, dtype=np.uint8), np.frombuffer(raw_b, dtype=np.uint8)
    width = max(1, np.dtype(dtype).itemsize)
    differing = int((bits_a != bits_b).reshape(-1, width).any(axis=1).sum())
    entry: dict[str, Any] = {"differing_elements": differing, "elements": int(values_a.size)}
    if values_a.dtype.kind in "fc" and values_a.size:
        with np.errstate(invalid="ignore", over="ignore"):
            gap = np.abs(values_a.astype(np.float64) - values_b.astype(np.float64))
        finite = gap[np.isfinite(gap)]
        entry["max_abs"] = float(finite.max()) if finite.size else None
    elif values_a.size and values_a.dtype.kind in "iu":
        entry["max_abs"] = float(np.abs(values_a.astype(np.float64) - values_b.astype(np.float64)).max())
    return entry


def _numpy_dtype(name: str) -> str | None:
    known = {"bfloat16": "uint16", "complex64": "complex64", "complex128": "complex128"}
    plain = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
    return known.get(name) or (name if name in plain else None)


def _decode(values: Any, dtype: str) -> Any:
    import numpy as np

    if dtype == "bfloat16":  # the upper half of a float32
        return (values.astype(np.uint32) << 16).view(np.float32)
    return values


def _known_explanation(log_a: OpLog, log_b: OpLog, op: OpEvent) -> str:
    threads_a, threads_b = log_a.header.get("threads"), log_b.header.get("threads")
    if threads_a != threads_b and threads_a is not None and threads_b is not None:
        return (
            f"the runs used {threads_a} and {threads_b} intra-op threads: a reduction split across "
            "threads adds in a different order (pin `determinism: threads:` in the job file)"
        )
    namespace = op.op.partition("::")[0]
    cuda = _on_gpu(log_a, op)
    stem = op.op.partition("::")[2]
    if cuda and (op.bitwise or stem.startswith(CUDA_ATOMIC_STEMS)):
        return (
            f"{op.op} accumulates with atomic adds in its CUDA kernel, in an order that changes from run "
            "to run; torch.use_deterministic_algorithms(True) selects a deterministic implementation "
            "where PyTorch has one and raises where it has none"
        )
    if op.bitwise:
        return f"PyTorch tags {op.op} nondeterministic_bitwise: its results may differ between runs"
    if namespace not in ("aten", "prim", "prims"):
        return f"{op.op} is a custom operator: its kernel gives different results for equal inputs"
    return (
        "every input is equal and the result is not: the kernel itself is not deterministic (a race "
        "between threads, memory it reads uninitialised, or entropy of its own)"
    )


def _on_gpu(log: OpLog, op: OpEvent) -> bool:
    """Whether the op ran on a GPU: its tensors carry on-device checksums there (`dev:`); an op with
    no tensor argument goes by whether the process had CUDA at all."""
    digests = [arg.digest for arg in (*op.inputs, *op.outputs) if arg.digest is not None]
    if digests:
        return any(digest.startswith(DEVICE_DIGEST) for digest in digests)
    return bool(log.header.get("cuda"))


def _first_differing_batch(log_a: OpLog, log_b: OpLog, step: int) -> int | None:
    batches_a, batches_b = log_a.of_kind("batch", step), log_b.of_kind("batch", step)
    for x, y in zip(batches_a, batches_b, strict=False):
        if [v.identity for v in x.inputs] != [v.identity for v in y.inputs]:
            return x.batch
    return None


def _batch_only(step: int, batch: int | None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "name": "",
        "module": "",
        "module_class": "",
        "source": "",
        "phase": "data",
        "step": step,
        "cause": DATA,
        "explanation": "the batch differs: data order or augmentation",
        "batch": batch,
        "context": [],
        "digests": {"a": None, "b": None},
    }
    found["sentence"] = sentence(found)
    return found


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
                "inputs": ", ".join(x.describe() for x in op.inputs),
                "outputs": ", ".join(x.describe() for x in op.outputs),
                "status": status,
                "diverges": position == index,
            }
        )
    return chosen


def module_text(module: str, module_class: str) -> str:
    if module:
        return module
    return f"{module_class} (outermost module)" if module_class else "outside any module"


def _digests(op: OpEvent) -> dict[str, list[str]]:
    return {"inputs": [x.identity for x in op.inputs], "outputs": [x.identity for x in op.outputs]}


def _arg_text(arg: Arg) -> str:
    return f"{arg.describe()} {arg.digest[:16]}" if arg.is_tensor and arg.digest else str(arg.value)


def _op_text(op: OpEvent) -> str:
    where = f" ({op.source})" if op.source else ""
    module = module_text(op.module, op.module_class)
    return f"`{op.op}` {f'in `{module}`' if op.module or op.module_class else module}{where}"


def _path_text(row: Pair) -> str:
    if row.a is not None:
        return f"only run A ran {_op_text(row.a)} here"
    assert row.b is not None
    return f"only run B ran {_op_text(row.b)} here"


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
