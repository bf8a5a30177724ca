"""The machine a lock is for: the image's Python and platform, and where pip looks for wheels.

The image installs wheels only (pip's `--only-binary=:all:`: nothing is built inside it), so a lock
names, for each package, one wheel that installs on the image's interpreter. pip is told that
interpreter explicitly (`--python-version`, `--abi`, `--platform`), so the machine that locks may run
another Python or another OS; resolving and downloading use the same flags, so every wheel a lock
names is one a download for it can fetch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reprobox.errors import UsageError

DEFAULT_PYTHON_VERSION = "3.11"  # the image's python3 (Debian bookworm's; the CUDA base installs the same)
# manylinux tags up to glibc 2.28, as the image's locks have always been made (the torch CPU wheel is
# manylinux_2_28); the image's own glibc is newer, so every one of them installs there. PEP 600 tags are
# listed one by one (pip widens only the legacy manylinux2014/2010 names), linux_x86_64 takes locally
# built wheels passed with --find-links.
NEWEST_GLIBC_MINOR = 28
PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(NEWEST_GLIBC_MINOR, 4, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
)
_PYTHON_VERSION = re.compile(r"3\.(\d{1,2})")


@dataclass(frozen=True)
class Target:
    """The interpreter a lock is for, and the wheel sources pip reads besides its own configuration."""

    python_version: str = DEFAULT_PYTHON_VERSION
    find_links: tuple[str, ...] = ()  # folders (or URLs) of wheels, as given
    no_index: bool = False  # only the find-links, no package index

    def describe(self) -> str:
        """How messages and the lock's header name the target."""
        return f"CPython {self.python_version}, manylinux x86_64"

    def wheel_flags(self) -> list[str]:
        """pip's flags for 'wheels for the image's interpreter only'."""
        abi = "cp" + self.python_version.replace(".", "")
        platforms = [flag for platform in PLATFORMS for flag in ("--platform", platform)]
        return [
            "--only-binary=:all:",
            "--implementation",
            "cp",
            "--python-version",
            self.python_version,
            *("--abi", abi, "--abi", "abi3", "--abi", "none"),
            *platforms,
        ]

    def index_flags(self) -> list[str]:
        """Where pip looks besides its configuration: --no-index, and each --find-links."""
        flags = ["--no-index"] if self.no_index else []
        for source in self.find_links:
            flags += ["--find-links", source]
        return flags


def check_python_version(text: str) -> str:
    """The `--python-version` as pip takes it (3.X); anything else is refused with the form it needs."""
    if not _PYTHON_VERSION.fullmatch(text):
        raise UsageError(
            f"--python-version {text!r} is not a CPython 3 version; give major.minor, e.g. "
            f"--python-version {DEFAULT_PYTHON_VERSION}"
        )
    return text
