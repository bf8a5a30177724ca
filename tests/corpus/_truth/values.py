"""Compares two loaded Python values deeply: NumPy arrays by array_equal, objects by their state.

Used after a library's own loader has read each run's file (joblib.load, statsmodels' load, json):
returns the paths of the values that differ, with both values, so a truth names what differs.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def differences(a: Any, b: Any, path: str = "", depth: int = 0) -> list[str]:
    if depth > 40:
        return []
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        if a_arr.dtype == object or b_arr.dtype == object:
            if a_arr.shape != b_arr.shape:
                return [f"{path}: shape {a_arr.shape} != {b_arr.shape}"]
            out: list[str] = []
            for i, (x, y) in enumerate(zip(a_arr.ravel(), b_arr.ravel(), strict=True)):
                out += differences(x, y, f"{path}[{i}]", depth + 1)
            return out
        if (
            a_arr.shape == b_arr.shape
            and a_arr.dtype == b_arr.dtype
            and np.array_equal(a_arr, b_arr, equal_nan=a_arr.dtype.kind in "fc")
        ):
            return []
        return [f"{path}: arrays differ"]
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: only in one run" for k in sorted(set(a) ^ set(b), key=str)]
        for k in sorted(set(a) & set(b), key=str):
            out += differences(a[k], b[k], f"{path}.{k}", depth + 1)
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += differences(x, y, f"{path}[{i}]", depth + 1)
        return out
    if type(a) is not type(b):
        return [f"{path}: type {type(a).__name__} != {type(b).__name__}"]
    if isinstance(a, float):
        return [] if a == b or (a != a and b != b) else [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, type) or (callable(a) and not hasattr(a, "__dict__")):
        return [] if a is b else [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, (int, str, bytes, bool, type(None), complex)):
        return [] if a == b else [f"{path}: {a!r} != {b!r}"]
    if hasattr(a, "__getstate__") or hasattr(a, "__dict__"):
        state_a = a.__getstate__() if hasattr(a, "__getstate__") else vars(a)
        state_b = b.__getstate__() if hasattr(b, "__getstate__") else vars(b)
        if state_a is not None or state_b is not None:
            return differences(state_a, state_b, path, depth + 1)
    if hasattr(a, "__reduce_ex__"):
        reduced_a, reduced_b = a.__reduce_ex__(4), b.__reduce_ex__(4)
        if isinstance(reduced_a, tuple) and isinstance(reduced_b, tuple):
            return differences(list(reduced_a[1:]), list(reduced_b[1:]), path, depth + 1)
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]
