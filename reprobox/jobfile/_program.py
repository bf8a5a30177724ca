"""What runs: the file's version, the job's name, its command and code folder, its seed and timeout."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from reprobox.guest.settings import referenced_variables
from reprobox.jobfile._checker import Checker, describe, shorten
from reprobox.jobfile._limits import MAX_ARG_BYTES, MAX_NAME_LENGTH, MAX_TIMEOUT
from reprobox.jobfile.schema import (
    ALWAYS_SET,
    MAX_SEED,
    NAME_PATTERN,
    SCHEMA_VERSION,
    WORKDIR_CODE,
    WORKDIR_COPY,
    WORKDIRS,
    DataMount,
)


def check_version(c: Checker, raw: Mapping[str, Any]) -> None:
    if "version" not in raw:
        c.fail("version", "is missing; add 'version: 1' at the top of the file")
    elif raw["version"] != SCHEMA_VERSION or isinstance(raw["version"], bool):
        c.fail(
            "version",
            f"{raw['version']!r} is not a job file version this reprobox understands; use 'version: 1'",
        )


def check_name(c: Checker, raw: Mapping[str, Any]) -> str:
    name = raw.get("name")
    if name is None:
        c.fail("name", "is missing; add a name such as 'name: tiny-mlp'")
        return ""
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        c.fail(
            "name",
            f"{shorten(name)!r} is not a valid name; use lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
        )
        return ""
    if len(name) > MAX_NAME_LENGTH:
        c.fail("name", f"is {len(name)} characters long; use at most {MAX_NAME_LENGTH}")
        return ""
    return name


def check_command(
    c: Checker, raw: Mapping[str, Any], env: Mapping[str, str], data: tuple[DataMount, ...]
) -> tuple[str, ...]:
    command = raw.get("command")
    if command is None:
        c.fail("command", "is missing; add the command to run, e.g. 'command: [python, train.py]'")
        return ()
    if isinstance(command, str):
        try:
            parts = shlex.split(command)
        except ValueError as exc:
            c.fail("command", f"cannot be split like a shell command ({exc}); fix the quoting")
            return ()
    elif isinstance(command, list) and all(isinstance(p, str | int | float) for p in command):
        parts = [str(p) for p in command]
    else:
        c.fail("command", "must be a list of strings or one string, e.g. [python, train.py]")
        return ()
    if not parts:
        c.fail("command", "is empty; give the program to run, e.g. [python, train.py]")
        return ()
    for index, part in enumerate(parts):
        if len(os.fsencode(part)) > MAX_ARG_BYTES:
            dotted = f"command.{index}" if isinstance(command, list) else "command"
            c.fail(dotted, f"has an argument longer than {MAX_ARG_BYTES} bytes; pass long values in a file")
            return ()
    data_env = {mount.env for mount in data if mount.env}
    known = set(env) | set(ALWAYS_SET) | data_env
    for index, part in enumerate(parts):
        for name in referenced_variables(part):
            if name not in known:
                dotted = f"command.{index}" if isinstance(command, list) else "command"
                c.fail(
                    dotted,
                    f"uses ${{{name}}}, which is not set; define it under 'env', name it as a "
                    f"data entry's 'env', or use one of {', '.join(ALWAYS_SET)}",
                )
    return tuple(parts)


def check_code(c: Checker, raw: Mapping[str, Any]) -> Path:
    if "code" not in raw:
        return c.base_dir.resolve()
    return c.relative_path(raw["code"], "code", must_be_dir=True) or c.base_dir


def check_seed(c: Checker, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        c.fail("seed", f"must be an integer from 0 to {MAX_SEED}, not {describe(value)}")
        return 0
    return value


def check_timeout(c: Checker, value: Any) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_TIMEOUT  # also refuses .nan
    ):
        c.fail(
            "timeout",
            f"must be a positive number of seconds, not {describe(value)}; "
            f"use at most {MAX_TIMEOUT:.0f} (a year)",
        )
        return None
    return float(value)


def check_workdir(c: Checker, value: Any) -> str:
    if value is None:
        return WORKDIR_CODE
    if value not in WORKDIRS:
        c.fail(
            "workdir",
            f"must be {WORKDIR_CODE} (the job starts in its read-only code folder and writes to "
            f"$REPROBOX_OUTPUT_DIR) or {WORKDIR_COPY} (it starts in a writable copy of its code, and "
            f"what it writes there is its output), not {describe(value)}",
        )
        return WORKDIR_CODE
    return str(value)


def check_cwd(c: Checker, value: Any, code: Path) -> str | None:
    """A folder inside the code, as a relative posix path, that exists there."""
    if value is None:
        return None
    fix = "give the folder the command starts in, relative to the code folder, e.g. cwd: projects/chargpt"
    if not isinstance(value, str) or not value.strip():
        c.fail("cwd", f"must be a relative folder path, not {describe(value)}; {fix}")
        return None
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts:
        c.fail("cwd", f"{value!r} leaves the code folder; {fix}")
        return None
    if not (code / path).is_dir():
        c.fail("cwd", f"{value!r} is not a folder of the code ({code}); {fix}")
        return None
    return path.as_posix()
