"""What the job's own code imports anywhere, read from its source: not only what one short run reached.

`reprobox init` stops its run at the first checkpoint, so an evaluation that imports `moviepy` after it
never ran. The import statements say it all the same: each module of the job's own code that the run
read is parsed, and so is every module of its own that those import (followed statically, whether the
run reached them or not). An import inside a `try` whose handler catches its failure and goes on is
optional (the code runs without it; a handler that raises again says it is needed), and one under
`if TYPE_CHECKING:` never runs: neither is needed. Standard library only: this runs inside the job's
own interpreter as it exits.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

MAX_FILES = 2000  # modules of the job's own code parsed; a larger tree is read up to there
MAX_NAMES = 32  # dotted names kept per top-level module
OPTIONAL_CATCHES = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


@dataclass(frozen=True)
class CodeImport:
    """Where the job's code first imports a top-level module."""

    root: str
    file: str
    line: int
    modules: tuple[str, ...] = ()  # the dotted names imported under it (`google.protobuf`, ...)


def imports_in_code(
    sources: Iterable[str], code_dir: str, search: Sequence[str] = ()
) -> dict[str, CodeImport]:
    """Each top-level module the job's own code needs, with the first place that imports it.

    `sources` are its modules the run read; `search` the folders inside `code_dir` that imports are
    resolved in besides each module's own folder (PYTHONPATH, the folder the command starts in)."""
    root_dir = code_dir.rstrip(os.sep) + os.sep
    folders = [d for d in search if (d.rstrip(os.sep) + os.sep).startswith(root_dir)]
    queue = sorted({s for s in sources if s.startswith(root_dir)})
    parsed: set[str] = set()
    found: dict[str, CodeImport] = {}
    while queue and len(parsed) < MAX_FILES:
        path = queue.pop(0)
        if path in parsed:
            continue
        parsed.add(path)
        try:
            needed = _needed_imports(ast.parse(Path(path).read_bytes()))
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):  # any file at all
            continue
        for name, level, line in needed:
            own = _own_modules(name, level, path, [str(Path(path).parent), code_dir, *folders], root_dir)
            queue += [p for p in own if p not in parsed]
            if level == 0 and name:
                root = name.partition(".")[0]
                first = found.setdefault(root, CodeImport(root, path, line))
                if "." in name and name not in first.modules and len(first.modules) < MAX_NAMES:
                    found[root] = replace(first, modules=(*first.modules, name))
    return found


def _needed_imports(tree: ast.AST) -> list[tuple[str, int, int]]:
    """(module, level, line) of each import that runs unguarded; `from . import x` gives x's module."""
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.Try | getattr(ast, "TryStar", ast.Try)) and tolerates_failure(node):
            for child in node.body:
                visit(child, True)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, guarded)
            return
        if isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.orelse:
                visit(child, guarded)
            return
        if not guarded and isinstance(node, ast.Import):
            found.extend((alias.name, 0, node.lineno) for alias in node.names)
        elif not guarded and isinstance(node, ast.ImportFrom):
            module = node.module or ""
            found.append((module, node.level, node.lineno))
            # `from . import helpers`, `from mypkg import model`: the names may be modules of the package
            found.extend(
                (f"{module}.{a.name}".lstrip("."), node.level, node.lineno)
                for a in node.names
                if a.name != "*"
            )
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(tree, False)
    return found


def tolerates_failure(node: ast.Try) -> bool:
    """Whether a `try` goes on when an import in it fails: a handler catches the failure and does not
    end by raising again or exiting (`except ImportError: raise ImportError("pip install h5py")` says
    the module is needed)."""
    for handler in node.handlers:
        caught = handler.type
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if (caught is None or any(_name(n) in OPTIONAL_CATCHES for n in names)) and not _gives_up(handler):
            return True
    return False


def _gives_up(handler: ast.ExceptHandler) -> bool:
    """Whether a handler ends by raising, or by exiting the program."""
    last = handler.body[-1] if handler.body else None
    if isinstance(last, ast.Raise):
        return True
    return (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and _name(last.value.func) in {"exit", "_exit", "quit"}
    )


def _type_checking(test: ast.expr) -> bool:
    return _name(test) == "TYPE_CHECKING"


def _name(node: ast.expr | None) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _own_modules(name: str, level: int, importer: str, folders: Sequence[str], root_dir: str) -> list[str]:
    """The files of the job's own code that `import name` (or a relative one) loads: each package's
    `__init__.py` on the way, and the module itself."""
    if level:
        base = Path(importer).parent
        for _ in range(level - 1):
            base = base.parent
        starts = [base]
    else:
        starts = [Path(folder) for folder in dict.fromkeys(folders)]
    parts = [part for part in name.split(".") if part]
    files: list[str] = []
    for start in starts:
        here = start
        for index, part in enumerate(parts):
            package, module = here / part / "__init__.py", here / f"{part}.py"
            if package.is_file():
                files.append(str(package))
                here = here / part
            elif module.is_file():
                files.append(str(module))
                break
            elif (here / part).is_dir() and index < len(parts) - 1:
                here = here / part  # a namespace package
            else:
                break
        if files:
            break
    return [f for f in files if f.startswith(root_dir)]
