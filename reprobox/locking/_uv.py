"""uv's resolver: the same resolution as pip's, for the image's interpreter, in seconds rather than minutes.

`uv pip compile --generate-hashes --format pylock.toml` resolves the requirements with the image's pins as
constraints, for its Python and platform (`--python-version`, `--python-platform`), wheels only, and
writes each package's wheels with their sha256 (PEP 751). Where it lists several for a package, the lock
pins the one pip prefers for the image (`wheel_rank`, by the target's tags); any of them installs there.

uv reads pip's configuration, not its own: the index, extra indexes, find-links, no-index and constraint
files pip would use (`_sources`: `pip config list`, which includes the PIP_* variables), so `reprobox
lock` sees the same packages either way. Where uv is absent, fails, or cannot say which wheel (a wheel
it has no tag for), the caller resolves with pip, whose failures are told as sentences (`_failures`).
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from reprobox import image, progress
from reprobox.locking._sources import IndexSettings, pip_settings
from reprobox.locking._target import PLATFORMS, Target

UV_PLATFORM = "x86_64-manylinux_2_28"  # the newest manylinux tag of the image's platforms (Target)
_TIMEOUT_S = 600


@dataclass(frozen=True)
class UvPackage:
    """One package of uv's resolution, with the wheel the lock pins it to."""

    name: str  # normalized
    version: str
    wheel: str
    sha256: str


@dataclass
class UvRun:
    """How uv's resolution went: its packages, or why not (then pip resolves, and tells)."""

    packages: list[UvPackage] = field(default_factory=list)
    failure: str | None = None
    seconds: float = 0.0


def uv_binary() -> str | None:
    """The uv that came with reprobox (the `uv` package's binary), else one on PATH."""
    try:
        module: Any = importlib.import_module("uv")
        found = str(module.find_uv_bin())
    except (ImportError, FileNotFoundError, AttributeError):
        found = ""
    return found if found and os.access(found, os.X_OK) else shutil.which("uv")


def resolve_with_uv(
    requirements: Path,
    constraints: Path,
    target: Target,
    scratch: Path,
    uv: str,
    *,
    settings: IndexSettings | None = None,
) -> UvRun:
    """uv's resolution of `requirements` under `constraints` for `target`, from the sources of pip's
    configuration (`settings`, read here when not given)."""
    settings = pip_settings(scratch) if settings is None else settings
    output = scratch / "pylock.toml"
    command = [
        uv,
        "pip",
        "compile",
        str(requirements),
        "--constraint",
        str(constraints),
        "--generate-hashes",
        "--format",
        "pylock.toml",
        "--output-file",
        str(output),
        "--python-version",
        target.python_version,
        "--python-platform",
        UV_PLATFORM,
        "--only-binary",
        ":all:",
        "--index-strategy",
        "unsafe-best-match",  # every index's versions, as pip's resolver sees them
        "--no-config",  # pip's configuration, below, not uv's
        "--no-header",
        "--quiet",
        *settings.flags(),
        *target.index_flags(),
    ]
    started = time.monotonic()
    lines: list[str] = []
    try:
        # in the caller's folder, not the scratch one: relative find-links are read as pip reads them
        with subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env={**os.environ, "UV_NO_PROGRESS": "1"},
        ) as process:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line)
                progress.build_output(line)
            returncode = process.wait(timeout=_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return UvRun(failure=str(exc), seconds=time.monotonic() - started)
    seconds = time.monotonic() - started
    if returncode != 0:
        return UvRun(failure="".join(lines[-5:]).strip() or f"uv exited with {returncode}", seconds=seconds)
    try:
        packages = read_pylock(output, target)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return UvRun(failure=f"uv's pylock.toml could not be read ({exc})", seconds=seconds)
    return UvRun(packages=packages, seconds=seconds)


def read_pylock(path: Path, target: Target) -> list[UvPackage]:
    """The packages of a pylock.toml, each pinned to the wheel pip would choose for `target`."""
    data = _toml_loads(path.read_text(encoding="utf-8"))
    packages = []
    for entry in data.get("packages", []):
        name = image.normalize_name(str(entry["name"]))
        choices = []
        for wheel in entry.get("wheels", []):
            filename = str(
                wheel.get("name") or unquote(urlsplit(str(wheel.get("url", ""))).path).rsplit("/", 1)[-1]
            )
            digest = (wheel.get("hashes") or {}).get("sha256")
            rank = wheel_rank(filename, target)
            if digest and rank is not None:
                choices.append((rank, filename, str(digest)))
        if not choices:
            raise ValueError(f"no wheel of {name} for {target.describe()} in uv's resolution")
        _rank, filename, digest = min(choices)
        packages.append(UvPackage(name, str(entry["version"]), filename, digest))
    return sorted(packages, key=lambda package: package.name)


def wheel_rank(filename: str, target: Target) -> tuple[int, int, int] | None:
    """How much pip prefers a wheel for `target` (lower first: the most specific platform, then ABI,
    then Python tag), or None when the wheel does not install there."""
    if not filename.endswith(".whl"):
        return None
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        return None
    pythons, abis, platforms = (set(tag.split(".")) for tag in parts[-3:])
    minor = int(target.python_version.split(".")[1])
    cp = f"cp3{minor}"
    abi_order = {cp: 0, "abi3": 1, "none": 2}
    python_order = {cp: 0, f"py3{minor}": 2, "py3": 3}
    python_order |= {f"cp3{m}": 1 for m in range(minor - 1, 1, -1)}  # abi3 wheels of older CPythons
    platform_order = {platform: index for index, platform in enumerate(PLATFORMS)} | {"any": len(PLATFORMS)}
    ranks = [
        (platform_order[platform], abi_order[abi], python_order[python])
        for python in pythons
        for abi in abis
        for platform in platforms
        if python in python_order
        and abi in abi_order
        and platform in platform_order
        and (abi != cp or python == cp)
        and (abi != "abi3" or python.startswith("cp3"))
    ]
    return min(ranks) if ranks else None


def _toml_loads(text: str) -> dict[str, Any]:
    for name in ("tomllib", "tomli"):
        try:
            reader = importlib.import_module(name)
        except ImportError:
            continue
        data: dict[str, Any] = reader.loads(text)
        return data
    raise ValueError("reading pylock.toml needs Python 3.11 or tomli")
