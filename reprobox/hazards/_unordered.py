"""The `unsorted-listing` and `completion-order` heuristics: an ordered thing built from something whose
order is not fixed.

A directory listing (`os.listdir`, `os.scandir`, `glob.glob`, `Path.iterdir`/`glob`/`rglob`, `os.walk`)
comes in the order the file system keeps its entries, which differs between file systems, machines and
copies of the data; `Pool.imap_unordered` and `as_completed` yield results in the order workers finish.
Which uses count is described at `Unordered._order_used`: sorting, counting, testing membership or
truthiness never do; building a list, numbering, or handing the result to other code do.
"""

from __future__ import annotations

import ast
from typing import Literal

from reprobox.hazards._file import FileContext
from reprobox.hazards._syntax import (
    _Callee,
    _names,
    _position,
    _scope_walk,
    _short,
    appended_names,
    builds_sequence,
)

Kind = Literal["listing", "walk", "completion"]

_LISTINGS = _names("os.listdir os.scandir glob.glob glob.iglob")
_PATH_LISTINGS = _names("iterdir glob rglob")  # pathlib.Path methods, on any receiver but a module
_COMPLETIONS = _names("concurrent.futures.as_completed asyncio.as_completed")
# Consumers for which the order does not matter; `sum` only for listings (a float sum depends on order).
_ORDER_FREE = _names("sorted set frozenset len min max any all")
_PASS_THROUGH = _names("list tuple iter reversed")  # hand the items on in the same order


class Unordered:
    """Finds directory listings and completion-ordered results used in their order, in one file."""

    def __init__(self, file: FileContext) -> None:
        self.file = file
        self.scopes: list[ast.AST] = []  # the enclosing scopes, innermost last

    def enter_scope(self, scope: ast.AST) -> None:
        self.scopes.append(scope)

    def leave_scope(self) -> None:
        self.scopes.pop()

    def check_call(self, node: ast.Call, callee: _Callee) -> None:
        kind = self._kind(callee)
        if kind is None:
            return
        used = self._walk_used(node) if kind == "walk" else self._order_used(node, kind)
        if used:
            rule = "completion-order" if kind == "completion" else "unsorted-listing"
            self.file.report(node, rule, f"{_short(node.func)}()")

    def _kind(self, callee: _Callee) -> Kind | None:
        qualname = callee.qualname or ""
        method = callee.attribute and not callee.foreign and not callee.torch_rooted
        if qualname in _LISTINGS or (method and callee.last in _PATH_LISTINGS):
            return "listing"
        if qualname == "os.walk":
            return "walk"
        if qualname in _COMPLETIONS or (method and callee.last == "imap_unordered"):
            return "completion"
        return None

    def _order_used(self, expr: ast.expr, kind: Kind) -> bool:
        """Whether the code around `expr` depends on the order of its items.

        sorted(...), set(...), len(...), min/max/any/all (and sum, for listings), `x in ...`, `not ...`
        and `if ...:` do not; list(...), tuple(...) and iter(...) pass the question on to their own use;
        a list, generator or dict comprehension over it does unless sorted at once; a loop does when it
        builds a sequence (`builds_sequence`) that is not sorted right after it; a name bound to it
        does when any later use does, unless a statement beside the binding sorts it; anything else
        (enumerate, indexing, returning it, handing it to other code) does.
        """
        parent = self.file.parents.get(expr)
        if isinstance(parent, ast.Call) and expr in parent.args and self._builtin(parent) is not None:
            return self._builtin_order_used(parent, kind)
        if _order_free_test(parent, expr):
            return False
        if isinstance(parent, ast.comprehension) and parent.iter is expr:
            return self._comprehension_order_used(self.file.parents.get(parent), kind)
        if isinstance(parent, (ast.For, ast.AsyncFor)) and parent.iter is expr:
            built = builds_sequence(parent, accumulates=kind == "completion")
            return built and not self._sorted_after(parent, appended_names(parent))
        target = _bound_name(parent, expr)
        return target is None or parent is None or self._name_order_used(target, parent, kind)

    def _builtin_order_used(self, call: ast.Call, kind: Kind) -> bool:
        name = self._builtin(call)
        if name in _ORDER_FREE or (name == "sum" and kind == "listing"):
            return False
        return self._order_used(call, kind) if name in _PASS_THROUGH else True

    def _builtin(self, call: ast.Call) -> str | None:
        func = call.func
        return func.id if isinstance(func, ast.Name) and func.id not in self.file.aliases else None

    def _comprehension_order_used(self, comprehension: ast.AST | None, kind: Kind) -> bool:
        """A list built from the items: used in their order unless sorted at once, or bound to a name
        that the next statements sort (`files = [...]`, then `files.sort()`)."""
        if comprehension is None or isinstance(comprehension, ast.SetComp):
            return False
        if self._sorted_at_once(comprehension, kind):
            return False
        name = _bound_name(self.file.parents.get(comprehension), comprehension)
        return not (name and self._sorted_after(_statement(self.file, comprehension), {name}))

    def _sorted_at_once(self, node: ast.AST | None, kind: Kind) -> bool:
        parent = self.file.parents.get(node) if node is not None else None
        if not isinstance(parent, ast.Call) or node not in parent.args:
            return False
        name = self._builtin(parent)
        return name in _ORDER_FREE or (name == "sum" and kind == "listing")

    def _name_order_used(self, name: str, binding: ast.AST, kind: Kind) -> bool:
        if self._sorted_after(_statement(self.file, binding), {name}):
            return False
        after = _position(binding)
        uses = [
            node
            for node in _scope_walk(self.scopes[-1] if self.scopes else self.file.tree)
            if isinstance(node, ast.Name)
            and node.id == name
            and isinstance(node.ctx, ast.Load)
            and _position(node) > after
        ]
        return any(self._order_used(use, kind) for use in uses)

    def _sorted_after(self, statement: ast.AST | None, names: set[str]) -> bool:
        """A later statement beside `statement` (in the same block) sorts one of `names`:
        `names.sort()`, `names = sorted(names)`, `return sorted(names)`."""
        if statement is None or not names:
            return False
        for later in _later_siblings(self.file, statement):
            for node in _own_expressions(later):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                in_place = (
                    isinstance(func, ast.Attribute)
                    and func.attr == "sort"
                    and isinstance(func.value, ast.Name)
                    and func.value.id in names
                )
                copied = (
                    self._builtin(node) == "sorted"
                    and bool(node.args)
                    and isinstance(node.args[0], ast.Name)
                    and node.args[0].id in names
                )
                if in_place or copied:
                    return True
        return False

    def _walk_used(self, node: ast.Call) -> bool:
        """os.walk: a loop or comprehension over it that builds a sequence, unless the loop sorts
        `dirnames` in place and reads `filenames` only through sorted(...) (or the result is sorted)."""
        parent = self.file.parents.get(node)
        if isinstance(parent, ast.comprehension) and parent.iter is node:
            return self._comprehension_order_used(self.file.parents.get(parent), "listing")
        if not isinstance(parent, (ast.For, ast.AsyncFor)) or parent.iter is not node:
            return False  # next(os.walk(d)) and other uses: left alone
        if not builds_sequence(parent) or self._sorted_after(parent, appended_names(parent)):
            return False
        target = parent.target
        if not (isinstance(target, ast.Tuple) and len(target.elts) == 3):
            return True
        dirs, files = target.elts[1], target.elts[2]
        if not (isinstance(dirs, ast.Name) and isinstance(files, ast.Name)):
            return True
        return not (self._sorts_in_place(parent, dirs.id) and self._read_sorted(parent, files.id))

    def _sorts_in_place(self, loop: ast.AST, name: str) -> bool:
        for node in ast.walk(loop):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "sort"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == name
            ):
                return True
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name
                for t in node.targets
            ):
                return True  # dirnames[:] = sorted(dirnames)
        return False

    def _read_sorted(self, loop: ast.AST, name: str) -> bool:
        if self._sorts_in_place(loop, name):
            return True
        uses = [
            n
            for n in ast.walk(loop)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        ]
        return all(not self._order_used(use, "listing") for use in uses)


def _bound_name(parent: ast.AST | None, expr: ast.AST) -> str | None:
    """The name `expr` is bound to: `x = expr`, `x: T = expr`, `(x := expr)`, `with expr as x`."""
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        target: ast.AST | None = parent.targets[0]
    elif isinstance(parent, (ast.AnnAssign, ast.NamedExpr)):
        target = parent.target
    elif isinstance(parent, ast.withitem) and parent.context_expr is expr:
        target = parent.optional_vars
    else:
        return None
    return target.id if isinstance(target, ast.Name) else None


def _order_free_test(parent: ast.AST | None, expr: ast.expr) -> bool:
    """`x in expr`, `not expr`, `if expr:`: membership and emptiness do not depend on the order."""
    if isinstance(parent, ast.Compare) and expr in parent.comparators:
        return all(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops)
    if isinstance(parent, ast.UnaryOp):
        return isinstance(parent.op, ast.Not)
    return isinstance(parent, (ast.If, ast.While, ast.IfExp)) and parent.test is expr


def _statement(file: FileContext, node: ast.AST) -> ast.AST | None:
    """The statement that holds `node` (itself, when it is one)."""
    current: ast.AST | None = node
    while current is not None and not isinstance(current, ast.stmt):
        current = file.parents.get(current)
    return current


def _later_siblings(file: FileContext, statement: ast.AST) -> list[ast.stmt]:
    parent = file.parents.get(statement)
    if parent is None:
        return []
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and statement in block:
            return block[block.index(statement) + 1 :]
    return []


def _own_expressions(statement: ast.stmt) -> list[ast.AST]:
    """The nodes of one statement, not those of the statements nested in it (an `if` body runs only
    sometimes, so a sort there does not count)."""
    nodes: list[ast.AST] = []
    stack: list[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.stmt))
    return nodes
