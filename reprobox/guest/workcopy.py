"""A writable copy of the job's code, for jobs that write next to it (the job file's `workdir: copy`).

Training scripts save where their authors chose: `./model.pt`, `out/chargpt/ckpt.pt`, `lightning_logs/`,
`runs/` for TensorBoard, and read their own files by relative paths. The code a run starts from is a
read-only snapshot, so such a job starts instead in a copy of it inside its outputs folder. When it
ends, every copied file it left as it was is taken away again, so the outputs are exactly what the
job wrote or changed. Files above LINK_ABOVE are linked, not copied: a job that only reads its data
pays nothing for it, and one that writes to such a file is refused, as with the snapshot itself.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

LINK_ABOVE = 64 << 20
CACHE_DIRS = ("__pycache__",)  # made by the interpreter importing the job's modules: never an output


@dataclass
class WorkCopy:
    """What was copied from `code` into `work`, to tell the job's own files from the copies afterwards."""

    code: Path
    work: Path
    files: list[str] = field(default_factory=list)  # copied regular files, relative
    links: dict[str, str] = field(default_factory=dict)  # relative path -> the link target we made
    dirs: list[str] = field(default_factory=list)  # folders made by the copy, relative


def make(code: Path, work: Path) -> WorkCopy:
    """Copy the code into `work` (regular files, folders, links as links; large files linked)."""
    copy = WorkCopy(code, work)
    for current, dirnames, filenames in os.walk(code):
        here = Path(current)
        relative_dir = here.relative_to(code)
        dirnames.sort()
        for name in sorted(dirnames):
            source = here / name
            relative = (relative_dir / name).as_posix()
            if source.is_symlink():
                dirnames.remove(name)  # a link to a folder is copied as the link, not walked
                _link(copy, relative, str(source.readlink()))
            elif not (work / relative).exists():
                (work / relative).mkdir()
                copy.dirs.append(relative)
        for name in sorted(filenames):
            source = here / name
            relative = (relative_dir / name).as_posix()
            target = work / relative
            if target.exists() or target.is_symlink():  # an input placed there before (a resume start)
                continue
            if source.is_symlink():
                _link(copy, relative, str(source.readlink()))
            elif source.is_file() and source.stat().st_size > LINK_ABOVE:
                _link(copy, relative, str(source))
            elif source.is_file():
                shutil.copy2(source, target)
                # the snapshot is read-only; its copy is the job's to overwrite (a model.pt left there
                # by an earlier plain run, saved to again)
                target.chmod(target.stat().st_mode | stat.S_IWUSR)
                copy.files.append(relative)
    return copy


def add_links(copy: WorkCopy, links: dict[str, str]) -> None:
    """Link files or folders that are not code into the copy where the job reads them (data kept
    beside the code: its `data:` entries, or what `reprobox init` offers its short run)."""
    for relative, points_to in sorted(links.items()):
        parts = Path(relative).parts
        target = copy.work / relative
        if (
            Path(relative).is_absolute()
            or ".." in parts
            or not parts
            or target.exists()
            or target.is_symlink()
        ):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        _link(copy, relative, points_to)


def _link(copy: WorkCopy, relative: str, points_to: str) -> None:
    (copy.work / relative).symlink_to(points_to)
    copy.links[relative] = points_to


def prune(copy: WorkCopy) -> None:
    """Take away every copy the job left unchanged, the interpreter's caches, and emptied folders."""
    for relative in copy.files:
        target, source = copy.work / relative, copy.code / relative
        try:
            if not target.is_symlink() and target.is_file() and filecmp.cmp(target, source, shallow=False):
                target.unlink()
        except OSError:  # gone, or made unreadable by the job: what is left is the job's
            continue
    for relative, points_to in copy.links.items():
        target = copy.work / relative
        if target.is_symlink() and str(target.readlink()) == points_to:
            target.unlink()
    for current, dirnames, _files in os.walk(copy.work):
        for name in list(dirnames):
            if name in CACHE_DIRS:
                shutil.rmtree(Path(current) / name, ignore_errors=True)
                dirnames.remove(name)
    for relative in sorted(copy.dirs, key=lambda d: d.count("/"), reverse=True):
        folder = copy.work / relative
        if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()
