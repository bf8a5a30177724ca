"""Where a job runs, chosen in one place: `open_runtime(name, options)`.

`RUNTIMES` maps each runtime's name to the module that implements it; each such module exposes
`create(options: RuntimeOptions) -> Runtime`. Modules are imported only when chosen, so the CLI
starts without the docker SDK or Slurm. `auto` is docker when an engine answers, else local.
A new runtime is one module with `create` plus one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

from reprobox import progress
from reprobox.errors import UsageError
from reprobox.runtimes.base import Runtime, RuntimeOptions

AUTO = "auto"

RUNTIMES: dict[str, str] = {
    "docker": "reprobox.runtimes.docker",
    "local": "reprobox.runtimes.local",
    "podman": "reprobox.runtimes.podman",
    "slurm": "reprobox.runtimes.slurm",
}


def names() -> tuple[str, ...]:
    """Every name `open_runtime` accepts, `auto` first (the CLI's --runtime choices)."""
    return (AUTO, *RUNTIMES)


def open_runtime(name: str, options: RuntimeOptions) -> Runtime:
    """The named runtime, ready to run; for docker the job's image is built first (or reused)."""
    if name == AUTO:
        from reprobox import engine

        if engine.engine_available():
            name = "docker"
        else:
            progress.say(
                "no Docker engine answers; running on the local runtime (use --runtime docker to insist)"
            )
            name = "local"
    module = RUNTIMES.get(name)
    if module is None:
        raise UsageError(f"unknown runtime {name!r}; use one of {', '.join(names())}")
    create = cast(Callable[[RuntimeOptions], Runtime], importlib.import_module(module).create)
    return create(options)


__all__ = ["AUTO", "RUNTIMES", "Runtime", "RuntimeOptions", "names", "open_runtime"]
