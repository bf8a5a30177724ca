"""Output paths paired by structure: a folder whose name differs between two runs while what lies under it
pairs file for file is a run-specific name (MLflow's random experiment and run ids, a W&B run folder, a
run folder named by the clock), whatever tool made it.

Pure functions over the two runs' unmatched output paths, so the rule needs no list of tools: the
evidence is the structure itself. The parts of a folder's name that differ (``1a2b3c4d`` in
``offline-run-<time>-1a2b3c4d``) are the run's own names inside its subtree: in file names under it
(``run-1a2b3c4d.wandb``) and in the values its files hold (``run_id``, ``artifact_uri``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

NAME_MARK = "<name>"
_TOKEN = re.compile(r"[A-Za-z0-9]+")
MIN_NAME_PART = 6
"""Shorter differing parts of a folder's name (a pid, experiment 0) are too common to mask in values."""


@dataclass(frozen=True)
class FolderPair:
    """Two folders, one per run, whose names differ while their contents pair file for file."""

    a: str
    b: str
    parts_a: tuple[str, ...]  # the differing parts of each name (the whole name when they do not align)
    parts_b: tuple[str, ...]


@dataclass
class StructuralPairs:
    files: list[tuple[str, str]] = field(default_factory=list)
    folders: list[FolderPair] = field(default_factory=list)

    def name_parts(self, path: str, side: int) -> tuple[str, ...]:
        """The run-specific names of the paired folders a file of one run (0: a, 1: b) lies under."""
        found: list[str] = []
        for folder in self.folders:
            top, parts = (folder.a, folder.parts_a) if side == 0 else (folder.b, folder.parts_b)
            if path.startswith(top + "/"):
                found += [p for p in parts if len(p) >= MIN_NAME_PART]
        return tuple(sorted(set(found), key=len, reverse=True))


@dataclass
class _Tree:
    files: dict[str, str] = field(default_factory=dict)  # name -> full path
    folders: dict[str, _Tree] = field(default_factory=dict)

    def all_files(self) -> list[str]:
        return [*self.files.values(), *(p for sub in self.folders.values() for p in sub.all_files())]


def pair_by_structure(paths_a: Iterable[str], paths_b: Iterable[str]) -> StructuralPairs:
    """Files of two runs paired through folders that differ only in their name (one such folder on each
    side at a level, with everything under them pairing); what does not pair is left out."""
    found = StructuralPairs()
    _match(_At(_tree(paths_a), "", ()), _At(_tree(paths_b), "", ()), found)
    return found


def _tree(paths: Iterable[str]) -> _Tree:
    root = _Tree()
    for path in paths:
        *folders, name = path.split("/")
        node = root
        for folder in folders:
            node = node.folders.setdefault(folder, _Tree())
        node.files[name] = path
    return root


@dataclass(frozen=True)
class _At:
    """One run's side of a folder being paired: what lies under it, its path, its run-specific names."""

    tree: _Tree
    path: str
    parts: tuple[str, ...]

    def canonical(self, name: str) -> str:
        for part in self.parts:
            name = name.replace(part, NAME_MARK)
        return name

    def into(self, name: str, new_parts: tuple[str, ...] = ()) -> _At:
        return _At(self.tree.folders[name], f"{self.path}{name}/", (*new_parts, *self.parts))


def _match(a: _At, b: _At, out: StructuralPairs) -> bool:
    """Pair what lies under two folders; True when every file under both paired."""
    complete = True
    files_b = _unique(b)
    for name, path in a.tree.files.items():
        other = files_b.pop(a.canonical(name), None)
        if other is None:
            complete = False
        else:
            out.files.append((path, other))
    complete = complete and not files_b
    folders_b = {b.canonical(n): n for n in b.tree.folders}
    left_a: list[str] = []
    for name in a.tree.folders:
        other_name = folders_b.pop(a.canonical(name), None)
        if other_name is None:
            left_a.append(name)
        else:
            complete &= _match(a.into(name), b.into(other_name), out)
    if len(left_a) == 1 and len(folders_b) == 1:
        name_a, name_b = left_a[0], next(iter(folders_b.values()))
        new_a, new_b = _differing_parts(name_a, name_b)
        trial = StructuralPairs()
        if _match(a.into(name_a, new_a), b.into(name_b, new_b), trial) and trial.files:
            out.files += trial.files
            out.folders += [
                FolderPair(f"{a.path}{name_a}", f"{b.path}{name_b}", new_a, new_b),
                *trial.folders,
            ]
            return complete
    return complete and not left_a and not folders_b


def _unique(side: _At) -> dict[str, str]:
    """Canonical name -> path of the files directly under a folder; a canonical name that more than one
    file shares pairs nothing (the pairing would be a guess)."""
    found: dict[str, list[str]] = {}
    for name, path in side.tree.files.items():
        found.setdefault(side.canonical(name), []).append(path)
    return {name: paths[0] for name, paths in found.items() if len(paths) == 1}


def _differing_parts(a: str, b: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The word-like parts in which two names differ, when they align part for part; else both names."""
    tokens_a, tokens_b = _TOKEN.findall(a), _TOKEN.findall(b)
    if len(tokens_a) == len(tokens_b) and _TOKEN.sub("", a) == _TOKEN.sub("", b):
        pairs = [(x, y) for x, y in zip(tokens_a, tokens_b, strict=True) if x != y]
        if pairs:
            return tuple(x for x, _ in pairs), tuple(y for _, y in pairs)
    return (a,), (b,)
