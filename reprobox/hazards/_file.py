"""One file being scanned: its path, its import aliases, every node's parent, and the findings so far.

The scanner and its two heuristics (`_set_order`, `_empty_reads`) share it: they resolve callees
through it and report findings into it.
"""

from __future__ import annotations

import ast

from reprobox.hazards._rules import RULES, Finding
from reprobox.hazards._syntax import _Callee, _dotted, _import_aliases, _position


class FileContext:
    """What every check of one file needs: name resolution through its imports, parents, reporting."""

    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        self.tree = tree
        self.aliases = _import_aliases(tree)
        self.parents: dict[ast.AST, ast.AST] = {
            child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)
        }
        self.findings: list[Finding] = []

    def report(self, node: ast.AST, rule_id: str, detail: str = "") -> None:
        rule = RULES[rule_id]
        line, column = _position(node)
        self.findings.append(
            Finding(
                path=self.path,
                line=line,
                column=column + 1,
                rule=rule.id,
                message=rule.message.format(detail=detail),
                fix=rule.fix,
                severity=rule.severity,
            )
        )

    def resolve(self, expr: ast.expr) -> _Callee:
        chain = _dotted(expr)
        if chain is None:
            last = expr.attr if isinstance(expr, ast.Attribute) else ""
            return _Callee(None, last, torch_rooted=False, foreign=False, attribute=True)
        base, attrs = chain
        imported = self.aliases.get(base)
        qualname = ".".join([imported or base, *attrs])
        root = qualname.split(".")[0]
        return _Callee(
            qualname=qualname,
            last=qualname.split(".")[-1],
            torch_rooted=imported is not None and root == "torch",
            foreign=imported is not None and root != "torch",
            attribute=bool(attrs),
        )
