"""How much a diverging result differs: from the bytes the op log kept of it in both runs, how many
elements differ and by how much at most (bfloat16 read as the upper half of a float32)."""

from __future__ import annotations

from typing import Any

from reprobox.forensics.drilldown._text import arg_text
from reprobox.records.oplog import Arg, OpEvent, OpLog, read_values


def output_differences(log_a: OpLog, log_b: OpLog, a: OpEvent, b: OpEvent) -> list[dict[str, Any]]:
    """For each result that differs: how many elements, and by how much (when its bytes were saved)."""
    found = []
    for position, (x, y) in enumerate(zip(a.outputs, b.outputs, strict=False)):
        if x.identity == y.identity:
            continue
        entry: dict[str, Any] = {"position": position, "a": arg_text(x), "b": arg_text(y)}
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
