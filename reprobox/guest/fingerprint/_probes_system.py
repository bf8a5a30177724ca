"""Probes of the machine and the process environment: CPU, memory, OS release, image and variables.

Files are read through the ``read_text`` the caller passes in (the package's ``_cached_text``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from reprobox.guest.fingerprint._absent import _attempt, absent, is_absent

# CPU features that select different floating-point kernels (x86 and Arm spellings).
NUMERICS_CPU_FLAGS: Final = frozenset(
    {"avx", "avx2", "fma", "f16c", "avx_vnni", "avx_vnni_int8", "avx_ne_convert", "avx_ifma"}
    | {"asimd", "asimdhp", "asimddp", "fphp", "sve", "sve2", "bf16", "i8mm", "sme"}
)
NUMERICS_CPU_FLAG_PREFIXES: Final = ("avx512", "amx")


def _int_or_text(value: str) -> int | str:
    try:
        return int(value)
    except ValueError:
        return value


def _environment(names: Sequence[str], environ: Mapping[str, str]) -> dict[str, str | None]:
    return {name: environ.get(name) for name in names}


def cpu_from_cpuinfo(text: str) -> dict[str, Any]:
    """Model and numerics-relevant ISA flags from the first processor in /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    model: object = fields.get("model name") or fields.get("Hardware")
    if not model and "CPU implementer" in fields:
        model = f"implementer {fields['CPU implementer']} part {fields.get('CPU part', '?')}"
    flags = (fields.get("flags") or fields.get("Features") or "").split()
    return {
        "model": model or absent("no model name in /proc/cpuinfo"),
        "flags": sorted(
            {f for f in flags if f in NUMERICS_CPU_FLAGS or f.startswith(NUMERICS_CPU_FLAG_PREFIXES)}
        ),
    }


def _probe_cpu(read_text: Callable[[str], str]) -> dict[str, Any]:
    parsed = _attempt(lambda: cpu_from_cpuinfo(read_text("/proc/cpuinfo")))
    cpu = parsed if not is_absent(parsed) else {"model": parsed, "flags": parsed}
    cpu["architecture"] = _attempt(lambda: os.uname().machine)
    cpu["logical_cores"] = os.cpu_count() or absent("os.cpu_count() is unknown")
    cpu["usable_cores"] = _attempt(lambda: len(os.sched_getaffinity(0)))
    return cpu


def _memory_total_bytes(read_text: Callable[[str], str]) -> int:
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", read_text("/proc/meminfo"), re.MULTILINE)
    if match is None:
        raise ValueError("no MemTotal line in /proc/meminfo")
    return int(match.group(1)) * 1024


def _os_release(read_text: Callable[[str], str]) -> dict[str, str | None]:
    values: dict[str, str] = {}
    for line in read_text("/etc/os-release").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip("\"'")
    return {
        "id": values.get("ID"),
        "version_id": values.get("VERSION_ID"),
        "pretty_name": values.get("PRETTY_NAME"),
    }


def _image(image: Mapping[str, str] | None) -> dict[str, Any]:
    source = (
        image
        if image is not None
        else {
            "id": os.environ.get("REPROBOX_IMAGE_ID", ""),
            "digest": os.environ.get("REPROBOX_IMAGE_DIGEST", ""),
        }
    )
    recorded = {key: source.get(key) or None for key in ("id", "digest")}
    if not any(recorded.values()):
        return absent("no container image recorded (REPROBOX_IMAGE_ID and REPROBOX_IMAGE_DIGEST are unset)")
    return recorded
