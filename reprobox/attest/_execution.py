"""The execution settings of an attestation, checked as types and ranges before a reviewer replays them.

`reproduce` runs the author's job with the seed, thread counts and environment the attestation
records, so a hand-made attestation could otherwise smuggle in a negative seed, a thread count of
"abc", a world size of a billion, or ``LD_PRELOAD`` that the job file never set. A dynamic-loader or
interpreter variable is accepted only when the attested job text itself sets it in its ``env``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from reprobox.errors import SpecError
from reprobox.yamlsource import parse_yaml

MAX_SEED = 2**32 - 1  # as job files: NumPy's legacy global RNG takes seeds below 2**32
MAX_THREADS = 4096
MAX_WORLD_SIZE = 65536
MAX_ENV_VALUE = 64 << 10
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_THREAD_TEXT = re.compile(r"^[0-9]{1,6}(,[0-9]{1,6}){0,7}$")
LOADER_PREFIXES = ("LD_", "DYLD_", "PYTHON")
LOADER_NAMES = frozenset({"BASH_ENV", "ENV", "PERL5OPT", "RUBYOPT", "NODE_OPTIONS"})
_DETERMINISM_BOOLS = (
    "algorithms",
    "warn_only",
    "cudnn_benchmark",
    "fill_uninitialized_memory",
    "cuda_launch_blocking",
    "seed_unseeded_generators",
    "tf32",
    "onednn",
)
_DETERMINISM_TEXTS = ("cublas_workspace_config", "nccl_algo")


class Checker(Protocol):
    def fail(self, field: str, message: str) -> None: ...

    def get(self, mapping: Mapping[str, Any], key: str, kind: type | tuple[type, ...], field: str) -> Any: ...


def is_loader_variable(name: str) -> bool:
    """A variable that changes which code the dynamic loader or an interpreter runs."""
    return name.startswith(LOADER_PREFIXES) or name in LOADER_NAMES


def declared_env(job: Any, path: Path) -> frozenset[str]:
    """The `env` keys the attested job text sets itself (none when it cannot be read)."""
    text = job.get("text") if isinstance(job, dict) else None
    if not isinstance(text, str):
        return frozenset()
    try:
        data = parse_yaml(text, path).data
    except SpecError:
        return frozenset()
    env = data.get("env") if isinstance(data, dict) else None
    return frozenset(k for k in env if isinstance(k, str)) if isinstance(env, dict) else frozenset()


def check_execution(checker: Checker, execution: Mapping[str, Any], declared: frozenset[str]) -> None:
    """Every field a replay uses: seed, determinism, threads, env, world size, launcher, trail."""
    field = "predicate.execution"
    seed = checker.get(execution, "seed", int, f"{field}.seed")
    if seed is not None:
        _in_range(checker, f"{field}.seed", seed, 0, MAX_SEED)
    determinism = checker.get(execution, "determinism", dict, f"{field}.determinism")
    if determinism is not None:
        _check_determinism(checker, determinism)
    threads = checker.get(execution, "threads", dict, f"{field}.threads")
    if threads is not None:
        for key, value in threads.items():
            _check_thread_count(checker, f"{field}.threads.{key}", value)
    env = checker.get(execution, "env", dict, f"{field}.env")
    if env is not None:
        _check_env(checker, env, declared)
    _check_sizes(checker, execution)


def _check_sizes(checker: Checker, execution: Mapping[str, Any]) -> None:
    """World size, launcher counts and trail interval: optional, whole numbers in range."""
    field = "predicate.execution"
    for key in ("world_size", "trail_every"):
        value = execution.get(key)
        if value is not None:
            top = MAX_WORLD_SIZE if key == "world_size" else 2**31
            if _is_int(value):
                _in_range(checker, f"{field}.{key}", value, 1, top)
            else:
                checker.fail(f"{field}.{key}", f"must be a whole number or null, not {type(value).__name__}")
    launcher = execution.get("launcher")
    if launcher is not None and not isinstance(launcher, dict):
        checker.fail(f"{field}.launcher", f"must be an object, not {type(launcher).__name__}")
    elif launcher is not None:
        for key in ("nproc_per_node", "nnodes"):
            value = launcher.get(key)
            if value is not None and not _is_int(value):
                checker.fail(f"{field}.launcher.{key}", f"must be a whole number, not {type(value).__name__}")
            elif value is not None:
                _in_range(checker, f"{field}.launcher.{key}", value, 1, MAX_WORLD_SIZE)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _in_range(checker: Checker, field: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        checker.fail(field, f"is {value}, outside {low}..{high}; the attestation was altered")


def _check_determinism(checker: Checker, determinism: Mapping[str, Any]) -> None:
    field = "predicate.execution.determinism"
    for key in _DETERMINISM_BOOLS:
        if key in determinism:
            checker.get(determinism, key, bool, f"{field}.{key}")
    for key in _DETERMINISM_TEXTS:
        value = determinism.get(key)
        if key in determinism and (not isinstance(value, str) or not _plain_text(value, 256)):
            checker.fail(f"{field}.{key}", "must be a short line of text")
    backends = determinism.get("sdpa_backends")
    if backends is not None and (
        not isinstance(backends, list)
        or len(backends) > 8
        or not all(isinstance(b, str) and _plain_text(b, 32) for b in backends)
    ):
        checker.fail(f"{field}.sdpa_backends", "must be null or a short list of kernel names")
    value = determinism.get("threads")
    if value is not None:
        if _is_int(value):
            _in_range(checker, f"{field}.threads", value, 1, MAX_THREADS)
        else:
            checker.fail(f"{field}.threads", f"must be a whole number or null, not {type(value).__name__}")


def _check_thread_count(checker: Checker, field: str, value: Any) -> None:
    """A count as probed (an int, or an object saying why it is absent) or as a variable's text."""
    if value is None or isinstance(value, dict):
        return
    if isinstance(value, str) and _THREAD_TEXT.match(value):  # OMP_NUM_THREADS may be "8,2"
        for count in value.split(","):
            _in_range(checker, field, int(count), 1, MAX_THREADS)
    elif _is_int(value):
        _in_range(checker, field, value, 1, MAX_THREADS)
    else:
        checker.fail(field, f"must be a thread count, not {value!r}"[:200])


def _check_env(checker: Checker, env: Mapping[str, Any], declared: frozenset[str]) -> None:
    for key, value in env.items():
        field = f"predicate.execution.env.{key}"[:200]
        if not ENV_NAME.match(key):
            checker.fail(field, "is not a valid environment variable name")
        elif is_loader_variable(key) and key not in declared:
            checker.fail(
                field,
                "is a dynamic-loader or interpreter variable the attested job file does not set; "
                "a replay never takes it from an attestation",
            )
        if not isinstance(value, str):
            checker.fail(field, f"must be a string, not {type(value).__name__}")
        elif not _plain_text(value, MAX_ENV_VALUE, newlines=True):
            checker.fail(field, f"must be text without NUL, at most {MAX_ENV_VALUE} characters")


def _plain_text(value: str, limit: int, *, newlines: bool = False) -> bool:
    return len(value) <= limit and "\0" not in value and (newlines or "\n" not in value)
