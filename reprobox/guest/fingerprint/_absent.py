"""The absent marker a failed probe leaves in place of its value, and the guard that leaves it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeGuard


def absent(reason: str) -> dict[str, str]:
    """The marker a probe leaves in place of a value it could not get."""
    return {"absent": reason}


def is_absent(value: object) -> TypeGuard[Mapping[str, str]]:
    return isinstance(value, Mapping) and set(value) == {"absent"}


def _attempt(probe: Callable[[], object]) -> Any:
    try:
        return probe()
    except Exception as exc:
        return absent(_reason(exc))


def _reason(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "NVMLError_NotSupported":
        return "not supported"
    try:
        text = str(exc)
    except Exception:
        text = ""
    return f"{name}: {text}" if text else name
