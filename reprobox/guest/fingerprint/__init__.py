"""Fingerprint the machine and the numerical stack a job runs on, without changing either.

Every probe is optional: one that fails is recorded as ``{"absent": "<reason>"}`` in its place, so a
fingerprint is always produced. ``collect`` never imports torch or numpy: it probes them only when the
process has already imported them (inside the job at exit), and a separate probe process asks for them
on purpose (``python -m reprobox.guest.fingerprint --import-torch``).

``FIELDS`` is the one table of which fields change numerics, how they are named to a person and in
which order a difference is worth naming; ``stack_digest`` hashes exactly those fields and
``reprobox.stackdiff`` ranks differences by the same table.

Decisions recorded in ``FIELDS``: the container image id and digest are *not* numerics fields, because
they change with every rebuild even when the content is identical; the parts of an image that change
numerics (torch, the cuDNN/cuBLAS actually loaded, BLAS, numpy, the OS release, the installed Python
distributions) are probed directly and are. Hostname, memory sizes, core counts, paths, ECC and
persistence modes, the GPU UUID hash and the rank of this process are recorded but are not.

This module collects and presents; the field table is in ``_fields``, the probes in ``_probes_system``
(CPU, memory, OS), ``_probes_nvidia`` and ``_probes_stack`` (torch, numpy, libraries), and the command
line in ``__main__``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from reprobox.errors import EnvironmentProblem
from reprobox.guest.fingerprint._absent import (
    _attempt,
    absent,
    is_absent,
)
from reprobox.guest.fingerprint._fields import (
    FIELDS,
    RECORDED_ENVIRONMENT,
    THREAD_ENVIRONMENT,
    field_spec,
    iter_fields,
    stack_digest,
)
from reprobox.guest.fingerprint._probes_nvidia import (
    _probe_nvidia,
)
from reprobox.guest.fingerprint._probes_stack import (
    TORCH_NOT_IMPORTED,
    _distribution_digest,
    _installed_distributions,
    _probe_numpy,
    _probe_torch,
    _torch_blas,
    loaded_libraries,
)
from reprobox.guest.fingerprint._probes_system import (
    _environment,
    _image,
    _int_or_text,
    _memory_total_bytes,
    _os_release,
    _probe_cpu,
    cpu_from_cpuinfo,
)

__all__ = [
    "FIELDS",
    "RECORDED_ENVIRONMENT",
    "SCHEMA",
    "THREAD_ENVIRONMENT",
    "TORCH_NOT_IMPORTED",
    "absent",
    "collect",
    "collect_in_new_process",
    "cpu_from_cpuinfo",
    "field_spec",
    "format_table",
    "is_absent",
    "iter_fields",
    "loaded_libraries",
    "stack_digest",
]

SCHEMA: Final = "reprobox.fingerprint/1"

# ---------------------------------------------------------------------------------------------------
# Collection


def collect(
    *,
    nvml: ModuleType | Any | None = None,
    image: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Fingerprint this process's machine and stack; never raises and never imports torch or numpy.

    ``nvml`` is a pynvml-compatible module (None: import pynvml if possible); ``image`` holds the
    container image's ``id`` and ``digest`` (None: from REPROBOX_IMAGE_ID / REPROBOX_IMAGE_DIGEST);
    ``environ`` is the job's environment where another process fingerprints for it (None: this
    process's own), so the thread counts and variables recorded are the ones the job ran with.
    """
    return _collect(nvml=nvml, image=image, torch_reason=TORCH_NOT_IMPORTED, environ=environ)


def _collect(
    *, nvml: Any, image: Mapping[str, str] | None, torch_reason: str, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    job_env = os.environ if environ is None else environ
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation notices from probed APIs must not reach the job
        torch = sys.modules.get("torch")
        nvidia, gpus = _probe_nvidia(nvml, torch)
        hardware = {
            "cpu": _probe_cpu(_cached_text),
            "memory_total_bytes": _attempt(lambda: _memory_total_bytes(_cached_text)),
            "hostname": _attempt(lambda: os.uname().nodename),
            "nvidia": nvidia,
            "gpus": gpus,
        }
        distributions = _attempt(_installed_distributions)
        versions: Mapping[str, str] = {} if is_absent(distributions) else distributions
        torch_facts = _probe_torch(torch, torch_reason)
        numpy_version, numpy_blas = _probe_numpy(sys.modules.get("numpy"))
        software = {
            "os": _attempt(lambda: _os_release(_cached_text)),
            "kernel": _attempt(lambda: os.uname().release),
            "image": _image(image),
            "python": {
                "implementation": sys.implementation.name,
                "version": sys.version.split()[0],
                "executable": sys.executable,
            },
            "torch": torch_facts["torch"],
            "nccl": torch_facts["nccl"],
            "libraries": _attempt(lambda: loaded_libraries(_read_text("/proc/self/maps"), versions)),
            "blas": {
                "torch": _attempt(lambda: _torch_blas(torch)) if torch else absent(torch_reason),
                "numpy": numpy_blas,
            },
            "numpy": numpy_version,
            "threads": {**torch_facts["threads"], **_environment(THREAD_ENVIRONMENT, job_env)},
            "determinism": torch_facts["determinism"],
            "precision": torch_facts["precision"],
            "environment": _environment(RECORDED_ENVIRONMENT, job_env),
            "distributions": distributions if is_absent(distributions) else _distribution_digest(versions),
            "distributed": {
                "world_size": _int_or_text(job_env.get("WORLD_SIZE", "1")),
                "rank": _int_or_text(job_env.get("RANK", "0")),
            },
        }
    fp: dict[str, Any] = {"schema": SCHEMA, "hardware": hardware, "software": software}
    fp["stack_digest"] = stack_digest(fp)
    return fp


# The probes read files only through these, passed in by _collect, so one substitute reaches all of them.
@functools.lru_cache(maxsize=8)
def _cached_text(path: str) -> str:
    """Files that do not change while a process runs (/proc/cpuinfo, /etc/os-release) are read once."""
    return Path(path).read_text(encoding="utf-8", errors="replace")


def _read_text(path: str) -> str:
    return Path(path).read_text(encoding="utf-8", errors="replace")


# ---------------------------------------------------------------------------------------------------
# Presentation


def format_table(fp: Mapping[str, Any]) -> str:
    """The fingerprint as an aligned two-column table under Hardware and Software headers."""
    sections = [("Hardware", fp.get("hardware", {})), ("Software", fp.get("software", {}))]
    rows: list[tuple[str, str] | str] = []
    for title, section in sections:
        rows.append(title)
        rows.extend((_row_name(path), _table_cell(path, value)) for path, value in iter_fields(section))
    rows.append(("stack digest", str(fp.get("stack_digest", ""))))
    width = max(len(row[0]) for row in rows if isinstance(row, tuple))
    lines = [row if isinstance(row, str) else f"  {row[0]:<{width}}  {row[1]}" for row in rows]
    return "\n".join(lines)


def _row_name(path: str) -> str:
    return re.sub(r"^gpus\[(\d+)\]\.", r"gpu \1 ", path)


def _table_cell(path: str, value: object) -> str:
    """A field as `reprobox fingerprint`'s table spells it: yes/no, sizes in GiB, lists space-separated.

    The guest cannot import the controller's `reprobox.valuetext`; this table is its own.
    """
    if is_absent(value):
        return f"absent ({value['absent']})"
    if value is None:
        return "unset" if path.rpartition(".")[2].isupper() else "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return " ".join(str(item) for item in value) if value else "(none)"
    if path.endswith("_bytes") and isinstance(value, int):
        return f"{value} ({value / 2**30:.1f} GiB)"
    return str(value)


# ---------------------------------------------------------------------------------------------------
# A probe in a process of its own


def collect_in_new_process(
    *, python: str = sys.executable, import_torch: bool = True, timeout: float = 120
) -> dict[str, Any]:
    """Run this module in a fresh interpreter (importing torch first if asked) and return its fingerprint."""
    command = [python, "-m", "reprobox.guest.fingerprint", *(["--import-torch"] if import_torch else [])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(
            f"the fingerprint probe `{' '.join(command)}` did not finish ({exc}); check that {python} runs"
        ) from exc
    if done.returncode != 0:
        raise EnvironmentProblem(
            f"the fingerprint probe `{' '.join(command)}` exited with status {done.returncode};"
            f" check that reprobox is installed for {python}",
            log_tail=done.stderr[-4000:],
        )
    result: dict[str, Any] = json.loads(done.stdout)
    return result
