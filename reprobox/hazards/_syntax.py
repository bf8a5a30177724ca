"""Reading a file's syntax tree: callees resolved through the file's imports, and small `ast` helpers."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

# ---------------------------------------------------------------------------------------------------
# Name resolution


@dataclass(frozen=True)
class _Callee:
    """What a call's `func` expression names, with the file's import aliases resolved."""

    qualname: str | None  # e.g. "torch.nn.functional.interpolate"; None when not a plain name chain
    last: str  # final name or attribute
    torch_rooted: bool  # resolves into the torch package
    foreign: bool  # resolves into another imported module (numpy, re, ...)
    attribute: bool  # `something.last(...)` rather than a bare `last(...)`

    def parts(self) -> list[str]:
        return self.qualname.split(".") if self.qualname else [self.last]


def _import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted module or object path, from every import in the file."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    aliases[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _dotted(expr: ast.expr) -> tuple[str, list[str]] | None:
    """`a.b.c` -> ("a", ["b", "c"]); None when the chain does not start at a name."""
    attrs: list[str] = []
    while isinstance(expr, ast.Attribute):
        attrs.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        return expr.id, attrs[::-1]
    return None


# ---------------------------------------------------------------------------------------------------
# Small helpers


def _names(words: str) -> frozenset[str]:
    return frozenset(words.split())


def _arg(call: ast.Call, keyword: str, position: int | None) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if position is not None and position < len(call.args):
        arg = call.args[position]
        return None if isinstance(arg, ast.Starred) else arg
    return None


def _has_splat(call: ast.Call) -> bool:
    return any(kw.arg is None for kw in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args)


def _is_const(expr: ast.expr | None, *values: object) -> bool:
    return (
        isinstance(expr, ast.Constant)
        and type(expr.value) in {type(v) for v in values}
        and expr.value in values
    )


def _short(expr: ast.expr, limit: int = 40) -> str:
    text = ast.unparse(expr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _scope_walk(scope: ast.AST) -> Iterator[ast.AST]:
    """Every node of a scope, not descending into nested functions, lambdas or classes."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


# Calls inside a loop that put the loop's items, in the loop's order, into something that keeps it.
_SEQUENCE_BUILDERS = _names("append extend insert write writelines writerow writerows")


def builds_sequence(loop: ast.For | ast.AsyncFor, *, accumulates: bool = False) -> bool:
    """Whether a loop's result depends on its order: it appends, writes, yields, or numbers what it stores.

    `out.append(w)`, `f.write(w)`, `print(w, file=f)`, `yield w` and `index[w] = len(index)` (or `= i`
    with `i += 1` in the loop) do; `table[w] = f(w)` does not, as each entry is the same whatever the
    order. With `accumulates`, `total += value` counts too (a floating-point sum depends on its order);
    `count += 1` never does.
    """
    counters = {
        node.target.id
        for node in _scope_walk(loop)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name)
    }
    for node in _scope_walk(loop):
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(node, ast.Call) and _writes_in_order(node):
            return True
        if (
            accumulates
            and isinstance(node, ast.AugAssign)
            and isinstance(node.target, ast.Name)
            and not isinstance(node.value, ast.Constant)
        ):
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) for t in node.targets):
            for part in ast.walk(node.value):
                if isinstance(part, ast.Name) and (part.id in counters or part.id == "len"):
                    return True
    return False


def _writes_in_order(call: ast.Call) -> bool:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr in _SEQUENCE_BUILDERS
    return (
        isinstance(call.func, ast.Name)
        and call.func.id == "print"
        and any(kw.arg == "file" for kw in call.keywords)
    )


def appended_names(loop: ast.For | ast.AsyncFor) -> set[str]:
    """Names of the lists a loop appends to or extends (`out.append(x)` -> "out")."""
    return {
        node.func.value.id
        for node in _scope_walk(loop)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"append", "extend", "insert"}
        and isinstance(node.func.value, ast.Name)
    }
