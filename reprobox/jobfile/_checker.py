"""What every section's validator shares: the problems found so far, the shared checks (keys, types,
paths) and how a value is quoted back in a message."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reprobox.errors import Problem
from reprobox.jobfile._limits import MAX_PATH_BYTES, MAX_PATH_COMPONENT_BYTES
from reprobox.yamlsource import Located


class Checker:
    """One parsed job file being checked: the problems found so far and the checks every section shares.

    Each section's validator (`_program`, `_environment`, `_machine`, `_outputs`) is a function of a
    Checker, so that every problem in every section is collected before the load gives up.
    """

    def __init__(self, located: Located, host_env: Mapping[str, str]) -> None:
        self.doc = located
        self.host_env = host_env
        self.problems: list[Problem] = []
        self.base_dir = located.path.parent
        self.secrets: list[str] = []  # values found secret while checking `env`: redacted wherever they land

    def fail(self, dotted: str, message: str) -> None:
        self.problems.append(self.doc.problem(dotted, message))

    def check_keys(self, mapping: Mapping[str, Any], allowed: tuple[str, ...], prefix: str) -> None:
        for key in mapping:
            if key in allowed:
                continue
            dotted = f"{prefix}.{key}" if prefix else str(key)
            import difflib  # only for a mistyped key

            close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(allowed)}"
            self.fail(dotted, f"unknown key '{key}'; {hint}")

    def check_nul_bytes(self, raw: Any) -> None:
        """A NUL byte (a "\\0" escape) in any key or value would be cut short by the OS; refuse it first."""
        stack: list[tuple[str, Any]] = [("", raw)]
        while stack:  # no recursion: depth is bounded by the YAML loader, not the stack
            dotted, value = stack.pop()
            if isinstance(value, str) and "\0" in value:
                self.fail(dotted, "contains a NUL byte (\\0); remove it")
            elif isinstance(value, dict):
                for key, item in value.items():
                    child = f"{dotted}.{key}" if dotted else str(key)
                    if isinstance(key, str) and "\0" in key:
                        self.fail(child, "has a NUL byte (\\0) in its key; remove it")
                        continue
                    stack.append((child, item))
            elif isinstance(value, list):
                stack.extend((f"{dotted}.{i}" if dotted else str(i), item) for i, item in enumerate(value))

    def check_path_length(self, value: str, dotted: str) -> bool:
        """Whether every component of `value` fits the file system; reports the problem if not."""
        encoded = os.fsencode(value)
        if len(encoded) > MAX_PATH_BYTES:
            self.fail(dotted, f"is {len(encoded)} bytes long, more than {MAX_PATH_BYTES}; shorten the path")
            return False
        for part in encoded.split(b"/"):
            if len(part) > MAX_PATH_COMPONENT_BYTES:
                self.fail(
                    dotted,
                    f"has a name of {len(part)} bytes, more than the {MAX_PATH_COMPONENT_BYTES} a file "
                    "system allows; shorten it",
                )
                return False
        return True

    def mapping(self, value: Any, dotted: str) -> dict[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            self.fail(dotted, f"must be a mapping, not {describe(value)}")
            return None
        return value

    def check_bool(self, value: Any, dotted: str) -> bool:
        if not isinstance(value, bool):
            self.fail(dotted, f"must be true or false, not {describe(value)}")
            return False
        return value

    def relative_path(self, value: Any, dotted: str, *, must_be_dir: bool) -> Path | None:
        if not isinstance(value, str) or not value:
            self.fail(dotted, f"must be a path (a string), not {describe(value)}")
            return None
        if not self.check_path_length(value, dotted):
            return None
        try:
            resolved = (self.base_dir / Path(value).expanduser()).resolve()
            is_dir, exists = resolved.is_dir(), resolved.exists()
        except (OSError, RuntimeError) as exc:  # too long once resolved, a link loop, no such user
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            self.fail(dotted, f"'{value}' cannot be resolved ({reason}); fix the path")
            return None
        if must_be_dir and not is_dir:
            self.fail(
                dotted,
                f"directory '{value}' does not exist (resolved to {resolved}); create it or fix the path",
            )
        elif not must_be_dir and not exists:
            self.fail(dotted, f"'{value}' does not exist (resolved to {resolved}); fix the path")
        return resolved


def describe(value: Any) -> str:
    """A value as the job file spelled it, for "must be ..., not VALUE" messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the string {shorten(value)!r}"
    if isinstance(value, int | float):
        return yaml_number(value)
    return f"a {type(value).__name__}"


def yaml_number(value: float) -> str:
    """A number as YAML spells it; a huge integer by its length, not its thousands of digits."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"nan": ".nan", "inf": ".inf", "-inf": "-.inf"}[repr(value)]
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {len(str(abs(value)))} digits"
    return repr(value)


def shorten(value: Any, limit: int = 80) -> Any:
    """Long strings are cut in messages: an error names the field, it does not echo a whole file."""
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + "..."
    return value
