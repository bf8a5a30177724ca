"""The `docker` runtime: the guest in a hardened, throwaway container of the job's image.

Hardened by default: a non-root user, no network, every capability dropped, no privilege gain, a
read-only root filesystem with a private /tmp, the code and data mounted read-only, and only the run
directory writable. `container_settings` turns a plan into the engine's create arguments as a pure
function; `DockerRuntime.run` starts the container, streams its output, enforces the timeout, and
records what `docker inspect` says was in force before it removes the container.

Modules: `_settings` (the pure translation: plan -> create arguments, inspect -> evidence, exit status),
`_image` (build or reuse the job's image, its recorded facts, the fingerprint inside it) and `_runtime`
(`DockerRuntime` and `create`, the registry's entry).
"""

from __future__ import annotations

from reprobox.runtimes.docker._image import (
    ensure_image,
    image_facts,
    image_fingerprint,
)
from reprobox.runtimes.docker._runtime import (
    DockerRuntime,
    RunDirLoan,
    create,
)
from reprobox.runtimes.docker._settings import (
    GUEST_USER,
    RUN_ID_LABEL,
    apply_exit_status,
    container_name,
    container_settings,
    container_user,
    effective_settings,
    size_bytes,
)

__all__ = [
    "GUEST_USER",
    "RUN_ID_LABEL",
    "DockerRuntime",
    "RunDirLoan",
    "apply_exit_status",
    "container_name",
    "container_settings",
    "container_user",
    "create",
    "effective_settings",
    "ensure_image",
    "image_facts",
    "image_fingerprint",
    "size_bytes",
]
