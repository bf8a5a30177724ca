"""The `set-iteration-order` heuristic: an ordered thing built from a set.

A set's iteration order depends on its elements' hashes, and a str's hash changes with every process
(PYTHONHASHSEED): numbering a vocabulary by iterating a set gives a different numbering each run.
What counts as a set is described at `SetOrder._is_set_expr`; which uses of one count, at
`SetOrder.check_consumer` and `builds_sequence` (in `_syntax`). Testing membership (`w in seen`) and
order-free consumers (`sorted`, `len`, ...) never count.
"""

from __future__ import annotations

import ast

from reprobox.hazards._file import FileContext
from reprobox.hazards._syntax import _Callee, _names, _scope_walk, builds_sequence

# Consumers for which the order of a set's elements does not matter.
_ORDER_FREE_CONSUMERS = _names("sorted set frozenset len sum min max any all")
# Methods of a set that return a set; and the operators that do when either side is one.
_SET_METHODS = _names("union intersection difference symmetric_difference copy")
_SET_OPERATORS = (ast.BitOr, ast.BitAnd, ast.Sub, ast.BitXor)
# Views whose set operators return a set: `d.keys() - other.keys()`.
_SET_LIKE_VIEWS = _names("keys items")
# Builtins that hand a set's items on in its order: zip(S, ...), map(f, S).
_ORDER_CARRIERS = _names("zip map")


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
        """Names that every binding in the scope binds to a set (`s |= ...` keeps a set a set).

        Repeated until nothing changes, so that `both = a | b` is a set once `a` is known to be one.
        """
        known: frozenset[str] = frozenset()
        while True:
            bound: dict[str, bool] = {}
            for node in _scope_walk(scope):
                if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Store):
                    continue
                parent = self.file.parents.get(node)
                if isinstance(parent, ast.AugAssign):
                    continue
                value = (
                    parent.value if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) else None
                )
                is_set = value is not None and self._is_set_expr(value, known)
                bound[node.id] = bound.get(node.id, True) and is_set
            found = frozenset(name for name, is_set in bound.items() if is_set)
            if found == known:
                return found
            known = found

    def _is_set_expr(self, expr: ast.expr, names: frozenset[str]) -> bool:
        """A set literal or comprehension, a name in `names`, a set operation with a set on either side
        (`a | b`, `d.keys() - e`), or a call that makes a set (see `_is_set_call`)."""
        if isinstance(expr, (ast.Set, ast.SetComp)):
            return True
        if isinstance(expr, ast.Name):
            return expr.id in names
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, _SET_OPERATORS):
            return any(self._is_set_expr(side, names) or _is_view(side) for side in (expr.left, expr.right))
        return isinstance(expr, ast.Call) and self._is_set_call(expr, names)

    def _is_set_call(self, call: ast.Call, names: frozenset[str]) -> bool:
        """set(...), frozenset(...), a set method that returns a set (`a.union(b)`, `set.union(a, b)`),
        or a dict built from a set (`dict.fromkeys(S)`, whose keys keep the set's order)."""
        func = call.func
        if isinstance(func, ast.Name):
            return func.id in {"set", "frozenset"} and func.id not in self.file.aliases
        if not isinstance(func, ast.Attribute):
            return False
        owner = func.value.id if isinstance(func.value, ast.Name) else None
        builtin = owner if owner not in self.file.aliases else None
        if func.attr == "fromkeys" and builtin == "dict":
            return bool(call.args) and self._is_set_expr(call.args[0], names)
        if func.attr not in _SET_METHODS:
            return False
        return builtin in {"set", "frozenset"} or self._is_set_expr(func.value, names)

    def _is_set(self, expr: ast.expr) -> bool:
        return self._is_set_expr(expr, self.scopes[-1] if self.scopes else frozenset())

    def _consumed_order_free(self, node: ast.AST) -> bool:
        parent = self.file.parents.get(node)
        return (
            isinstance(parent, ast.Call)
            and node in parent.args
            and isinstance(parent.func, ast.Name)
            and parent.func.id in _ORDER_FREE_CONSUMERS
        )

    def check_consumer(self, node: ast.Call, callee: _Callee) -> None:
        """enumerate(S), list(S), tuple(S), "sep".join(S), f.writelines(S), zip(S, ...) and map(f, S),
        where S is a set (see `_is_set_expr`) or a name bound only to sets in this scope.

        Comprehensions over S and loops over S that build a sequence are checked in their visitors;
        sorted(S), len(S), sum(...) and other order-free consumers are fine, also around zip and map.
        """
        bare = isinstance(node.func, ast.Name) and node.func.id not in self.file.aliases
        if bare and callee.last in _ORDER_CARRIERS:
            sets = node.args[1:] if callee.last == "map" else node.args
            if any(self._is_set(arg) for arg in sets) and not self._consumed_order_free(node):
                self.file.report(node, "set-iteration-order")
            return
        if not node.args or not self._is_set(node.args[0]):
            return
        numbered = bare and callee.last == "enumerate"
        listed = bare and callee.last in {"list", "tuple"} and not self._consumed_order_free(node)
        method = isinstance(node.func, ast.Attribute) and len(node.args) == 1
        written = method and callee.last in {"join", "writelines"}
        if numbered or listed or written:
            self.file.report(node, "set-iteration-order")

    def check_comprehension(self, node: ast.ListComp | ast.DictComp | ast.GeneratorExp) -> None:
        if self._is_set(node.generators[0].iter) and not self._consumed_order_free(node):
            self.file.report(node, "set-iteration-order")

    def check_loop(self, node: ast.For | ast.AsyncFor) -> None:
        # A plain loop over a set matters when it builds an ordered thing: d[key] = ..., out.append(...).
        if self._is_set(node.iter) and builds_sequence(node):
            self.file.report(node, "set-iteration-order")


def _is_view(expr: ast.expr) -> bool:
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in _SET_LIKE_VIEWS
        and not expr.args
    )
