"""The `set-iteration-order` heuristic: an ordered thing built from a set.

A set's iteration order depends on its elements' hashes, and a str's hash changes with every process
(PYTHONHASHSEED): numbering a vocabulary by iterating a set gives a different numbering each run.
Which uses of a set count is described at `SetOrder.check_consumer` and `_builds_sequence`.
"""

from __future__ import annotations

import ast

from reprobox.hazards._file import FileContext
from reprobox.hazards._syntax import _Callee, _names, _scope_walk

# Consumers for which the order of a set's elements does not matter.
_ORDER_FREE_CONSUMERS = _names("sorted set frozenset len sum min max any all")


class SetOrder:
    """Finds sets iterated into ordered things in one file; knows, scope by scope, which names are sets."""

    def __init__(self, file: FileContext) -> None:
        self.file = file
        self.scopes: list[frozenset[str]] = []  # names bound only to sets, innermost scope last

    def enter_scope(self, scope: ast.AST) -> None:
        self.scopes.append(self._names_bound_to_sets(scope))

    def enter_lambda(self) -> None:
        self.scopes.append(frozenset())  # a lambda binds no names to sets

    def leave_scope(self) -> None:
        self.scopes.pop()

    def _names_bound_to_sets(self, scope: ast.AST) -> frozenset[str]:
        """Names that every binding in the scope binds to a set (`s |= ...` keeps a set a set)."""
        bound: dict[str, bool] = {}
        for node in _scope_walk(scope):
            if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Store):
                continue
            parent = self.file.parents.get(node)
            if isinstance(parent, ast.AugAssign):
                continue
            value = parent.value if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) else None
            is_set = value is not None and self._is_set_literal_or_call(value)
            bound[node.id] = bound.get(node.id, True) and is_set
        return frozenset(name for name, is_set in bound.items() if is_set)

    def _is_set_literal_or_call(self, expr: ast.expr) -> bool:
        if isinstance(expr, (ast.Set, ast.SetComp)):
            return True
        return (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Name)
            and expr.func.id in {"set", "frozenset"}
            and expr.func.id not in self.file.aliases
        )

    def _is_set(self, expr: ast.expr) -> bool:
        if self._is_set_literal_or_call(expr):
            return True
        return isinstance(expr, ast.Name) and bool(self.scopes) and expr.id in self.scopes[-1]

    def _consumed_order_free(self, node: ast.AST) -> bool:
        parent = self.file.parents.get(node)
        return (
            isinstance(parent, ast.Call)
            and node in parent.args
            and isinstance(parent.func, ast.Name)
            and parent.func.id in _ORDER_FREE_CONSUMERS
        )

    def check_consumer(self, node: ast.Call, callee: _Callee) -> None:
        """enumerate(S), list(S), tuple(S) and "sep".join(S), where S is a set literal, a set(...) or
        frozenset(...) call, a set comprehension, or a name bound only to those in this scope.

        Comprehensions over S and loops over S that build a sequence are checked in their visitors;
        sorted(S), len(S), sum(...) and other order-free consumers are fine.
        """
        if not node.args or not self._is_set(node.args[0]):
            return
        bare = isinstance(node.func, ast.Name) and node.func.id not in self.file.aliases
        numbered = bare and callee.last == "enumerate"
        listed = bare and callee.last in {"list", "tuple"} and not self._consumed_order_free(node)
        joined = isinstance(node.func, ast.Attribute) and node.func.attr == "join" and len(node.args) == 1
        if numbered or listed or joined:
            self.file.report(node, "set-iteration-order")

    def check_comprehension(self, node: ast.ListComp | ast.DictComp | ast.GeneratorExp) -> None:
        if self._is_set(node.generators[0].iter) and not self._consumed_order_free(node):
            self.file.report(node, "set-iteration-order")

    def check_loop(self, node: ast.For | ast.AsyncFor) -> None:
        # A plain loop over a set matters when it builds an ordered thing: d[key] = ..., out.append(...).
        if self._is_set(node.iter) and _builds_sequence(node):
            self.file.report(node, "set-iteration-order")


def _builds_sequence(loop: ast.For | ast.AsyncFor) -> bool:
    """Whether a loop's result depends on its order: it appends, or numbers what it stores.

    `out.append(w)` and `index[w] = len(index)` (or `= i` with `i += 1` in the loop) do;
    `table[w] = f(w)` does not, as each entry is the same whatever the order.
    """
    counters = {
        node.target.id
        for node in ast.walk(loop)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name)
    }
    for node in ast.walk(loop):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"append", "extend", "insert", "write"}
        ):
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) for t in node.targets):
            for part in ast.walk(node.value):
                if isinstance(part, ast.Name) and (part.id in counters or part.id == "len"):
                    return True
    return False
