"""From two aligned operation logs to the first diverging operation and its cause, in one sentence.

Causes: `operation` (every input equal, the result differs: the kernel is not deterministic), `rng` (a
random draw from a generator whose state already differed), `data` (the batch: data order or
augmentation), `input` (a value that entered the step from outside the recorded operations: a
parameter or optimizer state, a Python number, a tensor made from Python or NumPy data), and `path`
(the runs ran different operations before any value differed: a decision taken outside torch).
How many elements of a result differ is `_elements`; how the answer reads (the sentence, the
operations around it) is `_text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reprobox.forensics.drilldown._align import Pair, align, first_difference
from reprobox.forensics.drilldown._elements import output_differences
from reprobox.forensics.drilldown._text import (
    DATA,
    INPUT,
    OPERATION,
    PATH,
    RNG,
    arg_text,
    context_rows,
    op_text,
    path_text,
    sentence,
)
from reprobox.records.oplog import Arg, OpEvent, OpLog

DEVICE_DIGEST = "dev:"  # how a tensor's digest starts when it was computed on a GPU (guest/tensorhash.py)

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
        return PATH, path_text(row), {}
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
    detail = {"inputs_equal": True, "outputs": output_differences(log_a, log_b, a, b)}
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
        "input": {"position": position, "a": arg_text(x), "b": arg_text(y), "tag": x.tag},
    }
    made_by = _made_on_other_path(rows, index, x)
    if made_by is not None:
        return PATH, f"this input was made by an operation only run A ran: {op_text(made_by)}", detail
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


def _digests(op: OpEvent) -> dict[str, list[str]]:
    return {"inputs": [x.identity for x in op.inputs], "outputs": [x.identity for x in op.outputs]}
