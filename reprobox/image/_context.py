"""The build context as bytes that depend on the sources alone: sorted names, zero owners, a fixed
mtime and normalized modes, without caches or editor leftovers."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from reprobox.image._project import BUNDLED_IMAGE_FILES, ProjectFiles

CONTEXT_MTIME = 946684800  # 2000-01-01T00:00:00Z, for every member of the build context
CONTEXT_WHEELHOUSE = "wheelhouse"
SKIPPED_NAMES = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".DS_Store"})
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".swp")


@dataclass(frozen=True)
class ContextFile:
    """One member of the build context: its name in the tar and the host file it comes from, or the
    bytes reprobox renders for it (`data`: a generated Dockerfile, a lock without its comments)."""

    name: str
    source: Path
    data: bytes | None = None

    @property
    def size(self) -> int:
        return len(self.data) if self.data is not None else self.source.stat().st_size


def context_tar(files: Iterable[ContextFile], wheels: Iterable[ContextFile] = ()) -> bytes:
    """The build context as tar bytes (see write_context)."""
    buffer = io.BytesIO()
    write_context(files, buffer, wheels)
    return buffer.getvalue()


def write_context(files: Iterable[ContextFile], out: IO[bytes], wheels: Iterable[ContextFile] = ()) -> None:
    """Write a deterministic tar: sorted names, owner 0 with empty names, fixed mtime, modes 644/755."""
    members = sorted(
        [*files, *(ContextFile(f"{CONTEXT_WHEELHOUSE}/{w.source.name}", w.source) for w in wheels)],
        key=lambda member: member.name,
    )
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for member in members:
            info = tarfile.TarInfo(member.name)
            info.size = member.size
            info.mtime = CONTEXT_MTIME
            executable = member.data is None and member.source.stat().st_mode & 0o111
            info.mode = 0o755 if executable else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if member.data is not None:
                archive.addfile(info, io.BytesIO(member.data))
                continue
            with member.source.open("rb") as handle:
                archive.addfile(info, handle)


def project_members(project: ProjectFiles) -> Iterable[ContextFile]:
    """The image files and the package under the same names from a checkout or an installed wheel
    (the package without the wheel's own copy of the image files), so both give the same context."""
    yield ContextFile("Dockerfile", project.dockerfile)
    yield ContextFile("pyproject.toml", project.pyproject)
    bundled = project.package_dir / BUNDLED_IMAGE_FILES
    for prefix, directory in (("env", project.env_dir), ("reprobox", project.package_dir)):
        for path in sorted(_tree_files(directory, leave_out=bundled)):
            yield ContextFile(f"{prefix}/{path.relative_to(directory).as_posix()}", path)


def _tree_files(directory: Path, leave_out: Path | None = None) -> Iterable[Path]:
    """Regular files under `directory`, without caches, bytecode, editor leftovers or `leave_out`."""
    for current, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if not _skipped(d) and Path(current) / d != leave_out]
        for filename in filenames:
            path = Path(current) / filename
            if not _skipped(filename) and path.is_file():
                yield path


def _skipped(name: str) -> bool:
    return name in SKIPPED_NAMES or name.endswith(SKIPPED_SUFFIXES) or name.startswith(".#")
