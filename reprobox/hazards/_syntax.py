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
