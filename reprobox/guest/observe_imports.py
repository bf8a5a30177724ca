"""The observed process's record, as it exits, of the installed packages the job needs: the distribution
and version of every one loaded since it started (what the job imports, and what those load), of every
one whose import began and was cut short (a library imported as a file is saved, when the watch's
Ctrl-C lands), and of every one its own code imports anywhere, read from its source (`code_imports`:
the run is cut short at its first checkpoint). Each comes with why ("imported by eval.py:12") and, for
one installed from a local folder (`pip install .`, `pip install -e .`), that folder.

Only the top-level modules imported are looked up, each in the metadata of the distributions that may
hold it (`installed`), never in every distribution's.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from reprobox.guest.code_imports import CodeImport, imports_in_code, tolerates_failure
from reprobox.guest.installed import Installed

Where = tuple[str, int]  # a file and line


class Watched(Protocol):
    """What an observer saw of one process, and how it writes its record (`observe.Observer`)."""

    code_dir: str
    skip: tuple[str, ...]
    job_imports: set[str]
    importers: dict[str, Where | None]
    at_start: set[str]
    sources: set[str]

    def write(self, kind: str, value: str, **more: str) -> None: ...


def record_imports(watched: Watched) -> None:
    """Write what the job imported: its code beyond its folder, and the distributions it needs."""
    loaded = {name.partition(".")[0] for name in list(sys.modules)}
    in_code = code_imports(watched)
    installed = Installed(sys.path)
    # Every installed package loaded counts, not only those the job names: torch.utils.tensorboard
    # needs tensorboard, and a job that imports torch alone still cannot run without it.
    # ... but not what a library tries to import and does without (torch.hub's tqdm progress bars).
    # One whose import began and did not finish counts too: the watch's Ctrl-C lands as it is imported.
    started = (loaded | set(watched.importers)) - watched.at_start
    needed = {
        root
        for root in started
        if _in_site_packages(_location(root)) and not _optional(watched.importers.get(root))
    }
    for root in sorted((watched.job_imports | set(in_code)) & loaded):
        location = _location(root) or ""
        if _in_site_packages(location):
            needed.add(root)
        elif location and not location.startswith((watched.code_dir, *watched.skip)):
            watched.write("external", root, file=location)  # code of the job's beyond its folder
    for root in sorted(needed):
        _distributions(watched, installed, root, in_code)
    # What its code imports where the short run never went (after the first checkpoint): found where
    # the interpreter would find it, without running it.
    for root in sorted(set(in_code) - loaded - needed - set(sys.stdlib_module_names)):
        origin = _origin(root)
        if origin is None or origin.startswith(watched.code_dir):
            continue
        if _in_site_packages(origin):
            _distributions(watched, installed, root, in_code)
        elif not origin.startswith(watched.skip):
            watched.write("external", root, file=origin)


def _distributions(
    watched: Watched, installed: Installed, root: str, in_code: Mapping[str, CodeImport]
) -> None:
    location = _location(root) or ""
    modules: list[str] = []
    if location.endswith(os.sep):  # a namespace package: only who provides what is imported
        found = in_code.get(root)
        modules = [name for name in list(sys.modules) if name.startswith(f"{root}.")]
        modules += found.modules if found else ()
    owners = installed.providing(root, location, modules)
    why = _why(watched, root, in_code)
    for distribution in owners:
        identity = distribution.identity()
        if identity is None:
            continue
        source = installed.installed_from(distribution)
        more = {"source": source} if source else {}
        watched.write("distribution", identity[0], module=root, version=identity[1], why=why, **more)


def _why(watched: Watched, root: str, in_code: Mapping[str, CodeImport]) -> str:
    """Where the job's code imports `root`, or that the run loaded it for what the job imports."""
    found = in_code.get(root)
    where = (found.file, found.line) if found else watched.importers.get(root)
    if where and where[0].startswith(watched.code_dir):
        return f"imported by {where[0][len(watched.code_dir) :]}:{where[1]}"
    return "loaded by the packages it imports"


def code_imports(watched: Watched) -> dict[str, CodeImport]:
    """The top-level modules the job's own code imports anywhere, read from its source (the files the
    interpreter opened, and its own modules those import: `__main__` has lost its `__file__` by the
    time the process exits)."""
    search = [os.path.abspath(p) for p in sys.path if p]  # noqa: PTH100 - strings are wanted
    return imports_in_code(watched.sources, watched.code_dir, search)


def _location(root: str) -> str | None:
    """Where a top-level module was loaded from (a namespace package: its first folder, ending in a
    separator), or would be, for one not loaded."""
    module = sys.modules.get(root)
    if module is None:
        return _origin(root)
    try:
        file = getattr(module, "__file__", None)
        folders = [] if isinstance(file, str) and file else [str(p) for p in module.__path__ or []]
    except Exception:  # noqa: BLE001 - a lazy module's proxy may raise anything when asked: no place known
        return None
    if isinstance(file, str) and file:
        return file
    return os.path.join(folders[0], "") if folders else None  # noqa: PTH118


def _origin(root: str) -> str | None:
    """The file the interpreter would load for a top-level module, found without running it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(root)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        return spec.origin
    locations = list(spec.submodule_search_locations or [])
    return os.path.join(locations[0], "") if locations else None  # noqa: PTH118 - a namespace package


def _in_site_packages(location: str | None) -> bool:
    """Whether a module lies in an installed package (not the standard library, a built-in or the job's
    own code)."""
    return bool(location) and "-packages" + os.sep in (location or "")


_PARSED: dict[str, ast.Module | None] = {}  # importer file -> its syntax tree, None when unreadable


def _optional(where: Where | None) -> bool:
    """Whether the import at ``where`` lies in a ``try`` whose handler lets the code go on without the
    module (not one that raises again): the library runs without it, so the job does not need it."""
    if where is None:
        return False
    path, line = where
    if path not in _PARSED:  # one library file often loads several optional modules
        try:
            _PARSED[path] = ast.parse(Path(path).read_bytes())
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            _PARSED[path] = None
    tree = _PARSED[path]
    if tree is None:
        return False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try) or not node.body:
            continue
        last = node.body[-1].end_lineno or node.body[-1].lineno
        if node.body[0].lineno <= line <= last and tolerates_failure(node):
            return True
    return False
