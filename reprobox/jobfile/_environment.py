"""What the job sees: its environment variables (and which of them are secrets), its determinism
settings and its data mounts."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from reprobox.guest.determinism import SDPA_BACKENDS, Determinism
from reprobox.guest.settings import expand_variables, referenced_variables
from reprobox.jobfile._checker import Checker, describe, shorten
from reprobox.jobfile._limits import MAX_ARG_BYTES, MAX_THREADS, RESERVED_ENV, RESERVED_TARGETS
from reprobox.jobfile.schema import (
    CUBLAS_WORKSPACE_CONFIGS,
    ENV_NAME_PATTERN,
    NCCL_ALGOS,
    SECRET_PATTERN,
    DataMount,
)


def check_env(c: Checker, value: Any) -> dict[str, str]:
    entry = c.mapping(value, "env")
    if entry is None:
        return {}
    env: dict[str, str] = {}
    for key, item in entry.items():
        dotted = f"env.{key}"
        if not isinstance(key, str) or not ENV_NAME_PATTERN.match(key):
            c.fail(dotted, f"{key!r} is not a valid environment variable name")
            continue
        if key.startswith("REPROBOX_") or key == "PYTHONHASHSEED":
            c.fail(dotted, f"'{key}' is set by reprobox; use 'seed' or 'determinism' instead")
            continue
        if isinstance(item, bool):
            text = "1" if item else "0"
        elif isinstance(item, str | int | float):
            text = str(item)
        else:
            c.fail(dotted, f"must be a string or number, not {describe(item)}")
            continue
        try:
            env[key] = expand_variables(text, c.host_env)
        except KeyError as exc:
            c.fail(dotted, f"uses ${{{exc.args[0]}}}, which is not set in your environment; export it")
            continue
        if len(os.fsencode(f"{key}={env[key]}")) > MAX_ARG_BYTES:
            c.fail(dotted, f"is longer than the {MAX_ARG_BYTES} bytes a process can be given; shorten it")
            continue
        # A secret stays one under any name: redacted by value wherever it lands.
        c.secrets += [
            c.host_env[name]
            for name in referenced_variables(text)
            if SECRET_PATTERN.search(name) and c.host_env.get(name)
        ]
        if SECRET_PATTERN.search(key) and env[key]:
            c.secrets.append(env[key])
    return env


def check_determinism(c: Checker, value: Any) -> Determinism:
    entry = c.mapping(value, "determinism")
    if entry is None:
        return Determinism()
    allowed = tuple(Determinism.__dataclass_fields__)
    c.check_keys(entry, allowed, "determinism")
    values: dict[str, Any] = {}
    for key in allowed:
        if key in entry:
            check = _DETERMINISM_CHECKS.get(key, _bool_setting)
            checked = check(c, f"determinism.{key}", entry[key])
            if checked is not _INVALID:
                values[key] = checked
    return Determinism(**{**asdict(Determinism()), **values})


_INVALID = object()  # a setting that failed its check (the failure is recorded); the default stays


def _bool_setting(c: Checker, dotted: str, item: Any) -> Any:
    c.check_bool(item, dotted)
    return item if isinstance(item, bool) else _INVALID


def _one_of(allowed: tuple[str, ...], fix: str) -> Callable[[Checker, str, Any], Any]:
    def check(c: Checker, dotted: str, item: Any) -> Any:
        if item in allowed:
            return item
        c.fail(dotted, f"{item!r} is not allowed; {fix}")
        return _INVALID

    return check


def _threads(c: Checker, dotted: str, item: Any) -> Any:
    if item is None or (not isinstance(item, bool) and isinstance(item, int) and 1 <= item <= MAX_THREADS):
        return item
    c.fail(dotted, f"must be a positive integer or null, not {describe(item)}; use at most {MAX_THREADS}")
    return _INVALID


def _sdpa_backends(c: Checker, dotted: str, item: Any) -> Any:
    """Null (PyTorch's own choice), or a non-empty list of attention kernel names, each once."""
    if item is None:
        return None
    fix = f"use a list of {', '.join(SDPA_BACKENDS)}, e.g. [math], or null for PyTorch's own choice"
    unknown = [name for name in item if name not in SDPA_BACKENDS] if isinstance(item, list) else []
    if not isinstance(item, list) or not item:
        c.fail(dotted, f"must be a non-empty list or null, not {describe(item)}; {fix}")
    elif unknown:
        c.fail(dotted, f"{unknown[0]!r} is not an attention kernel; {fix}")
    elif len(set(item)) != len(item):
        c.fail(dotted, f"names a kernel twice; {fix}")
    else:
        return tuple(item)
    return _INVALID


_DETERMINISM_CHECKS: dict[str, Callable[[Checker, str, Any], Any]] = {
    "cublas_workspace_config": _one_of(CUBLAS_WORKSPACE_CONFIGS, "use ':4096:8' (default) or ':16:8'"),
    "nccl_algo": _one_of(NCCL_ALGOS, "use 'Ring' (default), '^NVLS' or 'Tree'"),
    "threads": _threads,
    "sdpa_backends": _sdpa_backends,
}


def check_data(c: Checker, value: Any) -> tuple[DataMount, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        c.fail("data", "must be a list of {source, target} mappings")
        return ()
    mounts: list[DataMount] = []
    targets: set[str] = set()
    for index, item in enumerate(value):
        dotted = f"data.{index}"
        entry = c.mapping(item, dotted)
        if entry is None:
            continue
        c.check_keys(entry, ("source", "target", "env"), dotted)
        source = c.relative_path(entry.get("source"), f"{dotted}.source", must_be_dir=False)
        target = entry.get("target")
        if not isinstance(target, str) or not target.startswith("/"):
            c.fail(f"{dotted}.target", "must be an absolute path inside the container, e.g. /data")
            continue
        if not c.check_path_length(target, f"{dotted}.target"):
            continue
        normalized = "/" + posixpath.normpath(target).lstrip("/")  # '/data/../x' is '/x'
        if normalized in targets:
            c.fail(f"{dotted}.target", f"'{target}' is used by two data entries; give each its own")
        if normalized == "/" or any(
            normalized == reserved or normalized.startswith(reserved + "/") for reserved in RESERVED_TARGETS
        ):
            c.fail(
                f"{dotted}.target",
                f"'{target}' is {normalized}, which reprobox or the kernel uses; choose another path "
                "such as /data",
            )
        targets.add(normalized)
        env_name = entry.get("env")
        if env_name is not None and (not isinstance(env_name, str) or not ENV_NAME_PATTERN.match(env_name)):
            c.fail(f"{dotted}.env", f"{shorten(env_name)!r} is not a valid environment variable name")
            env_name = None
        elif env_name is not None and (env_name.startswith("REPROBOX_") or env_name in RESERVED_ENV):
            c.fail(f"{dotted}.env", f"'{env_name}' is set by reprobox; choose another name such as DATA_DIR")
            env_name = None
        if source is not None:
            mounts.append(DataMount(source=source, target=normalized, env=env_name))
    return tuple(mounts)
