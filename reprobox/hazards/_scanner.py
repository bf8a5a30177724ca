"""One pass over one file's syntax tree that collects findings, including the two heuristic rules.

The heuristics are described where they are implemented: reading a `torch.empty` result before filling
it (`_Scanner._check_empty_reads`) and building an ordered thing from a set (`_Scanner._check_set_*`,
`_builds_sequence`).
"""

from __future__ import annotations

import ast
from typing import Literal

from reprobox.hazards._call_rules import (
    _CLOCK_CALLS,
    _ENTROPY_CALLS,
    _SEED_CALLS,
    ASSIGN_RULES,
    CALL_RULES,
    AssignRule,
    _always,
    _autotune,
)
from reprobox.hazards._rules import RULES, Finding
from reprobox.hazards._syntax import (
    _Callee,
    _dotted,
    _import_aliases,
    _is_const,
    _names,
    _position,
    _scope_walk,
    _short,
)

# How a use of a torch.empty result is classified (see _Scanner._check_empty_reads).
_FILL_METHODS = _names(
    "zero_ fill_ normal_ uniform_ copy_ random_ bernoulli_ exponential_ geometric_ log_normal_ cauchy_"
)
_METADATA = _names(
    "shape dtype device ndim layout is_cuda requires_grad names nbytes itemsize size dim numel nelement "
    "stride element_size is_contiguous storage_offset data_ptr get_device is_floating_point is_complex "
    "new_zeros new_ones new_full new_empty new_tensor"
)
_VIEW_METHODS = _names(
    "view view_as reshape reshape_as flatten unflatten squeeze unsqueeze permute transpose t narrow select "
    "expand expand_as as_strided movedim diagonal contiguous clone detach to cuda cpu float half double "
    "bfloat16 long int pin_memory share_memory_ requires_grad_"
)
_VIEW_ATTRIBUTES = _names("T mT H mH data real imag")
_READING_BUILTINS = _names("print float int bool sum min max abs")
# In-place writes that may cover only part of the tensor: what is read later is unknowable.
_PARTIAL_WRITE_METHODS = _names(
    "scatter_ index_copy_ index_fill_ masked_fill_ masked_scatter_ put_ index_put_ fill_diagonal_"
)
_OUT_KEYWORDS = _names("out output")
_WRAPPING_CONSTRUCTORS = _names("Parameter Buffer UninitializedParameter register_buffer")
# torch namespaces whose functions write into tensors passed to them (collectives, kernels' outputs).
_WRITING_NAMESPACES = _names("torch.distributed torch.cuda.nccl torch._C torch.ops")
_EMPTY_FACTORIES = _names("empty empty_like empty_strided empty_permuted")

# Consumers for which the order of a set's elements does not matter.
_ORDER_FREE_CONSUMERS = _names("sorted set frozenset len sum min max any all")

Use = Literal["fill", "read", "escape", "neutral"]


class _Scanner(ast.NodeVisitor):
    """One pass over one file's tree; findings accumulate in `self.findings`."""

    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        self.aliases = _import_aliases(tree)
        self.parents: dict[ast.AST, ast.AST] = {
            child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)
        }
        self.findings: list[Finding] = []
        self._set_names: list[frozenset[str]] = []
        self._math_attention_depth = 0
        self._settings: list[tuple[ast.expr, AssignRule, bool]] = []  # (target, rule, literally safe)

    # -- reporting ----------------------------------------------------------------------------------

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

    # -- resolution ---------------------------------------------------------------------------------

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

    # -- scopes -------------------------------------------------------------------------------------

    def _enter_scope(self, scope: ast.AST) -> None:
        self._set_names.append(self._names_bound_to_sets(scope))
        self._check_empty_reads(scope)

    def visit_Module(self, node: ast.Module) -> None:
        self._enter_scope(node)
        self.generic_visit(node)
        self._set_names.pop()
        self._report_settings()

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            if not isinstance(decorator, ast.Call) and self.resolve(decorator).qualname == "torch.compile":
                self.report(decorator, "compile")
        self._enter_scope(node)
        self.generic_visit(node)
        self._set_names.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._set_names.append(frozenset())
        self.generic_visit(node)
        self._set_names.pop()

    def visit_With(self, node: ast.With) -> None:
        math_only = any(self._is_math_only_attention(item.context_expr) for item in node.items)
        self._math_attention_depth += math_only
        self.generic_visit(node)
        self._math_attention_depth -= math_only

    def _is_math_only_attention(self, expr: ast.expr) -> bool:
        if not isinstance(expr, ast.Call) or self.resolve(expr.func).last != "sdpa_kernel":
            return False
        backends = [n.attr for n in ast.walk(expr) if isinstance(n, ast.Attribute) and n.attr.isupper()]
        return bool(backends) and all(b == "MATH" for b in backends)

    # -- calls --------------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.resolve(node.func)
        for entry in CALL_RULES:
            if not entry.matches(callee):
                continue
            if entry.rule == "fused-attention" and self._math_attention_depth:
                continue
            detail = (entry.condition or _always)(node, callee)
            if detail is not None:
                self.report(node, entry.rule, detail)
        if callee.attribute and not callee.torch_rooted and not callee.foreign and callee.last == "compile":
            detail = _autotune(node)  # model.compile(mode="max-autotune"), nn.Module.compile
            if detail:
                self.report(node, "compile-autotune", detail)
        self._check_seed_call(node, callee)
        self._check_set_consumer(node, callee)
        self._check_unassigned_empty(node, callee)
        self.generic_visit(node)

    # -- assignments --------------------------------------------------------------------------------

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_assignment(target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._check_assignment(node.target, node.value)
        self.generic_visit(node)

    def _check_assignment(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Attribute):
            qualname = self.resolve(target).qualname
            for entry in ASSIGN_RULES:
                if qualname == entry.target:
                    self._settings.append((target, entry, _is_const(value, entry.safe)))
        name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
        if "seed" in name.lower():
            self._check_seed_value(value)

    def _report_settings(self) -> None:
        """Assignments to torch settings, decided once the whole file is read: a later assignment
        wins, so an unsafe value that a later line of the file sets back to the safe one (`benchmark =
        True`, then `benchmark = False` further down) is not reported; any other unsafe one is."""
        ordered = sorted(self._settings, key=lambda item: _position(item[0]))
        for index, (target, entry, safe) in enumerate(ordered):
            reset_later = any(
                later_safe and later_entry == entry for _, later_entry, later_safe in ordered[index + 1 :]
            )
            if not safe and not reset_later:
                self.report(target, entry.rule, entry.detail)

    # -- seeds --------------------------------------------------------------------------------------

    def _check_seed_call(self, node: ast.Call, callee: _Callee) -> None:
        if callee.last in _SEED_CALLS:
            for arg in node.args:
                self._check_seed_value(arg)
        for kw in node.keywords:
            if callee.last in _SEED_CALLS or (kw.arg and "seed" in kw.arg.lower()):
                self._check_seed_value(kw.value)

    def _check_seed_value(self, value: ast.expr) -> None:
        for node in ast.walk(value):
            if not isinstance(node, ast.Call):
                continue
            qualname = self.resolve(node.func).qualname or ""
            if qualname in _CLOCK_CALLS:
                self.report(value, "seed-from-clock", f"{qualname}()")
                return
            if qualname in _ENTROPY_CALLS or qualname.startswith("secrets."):
                self.report(value, "seed-from-entropy", f"{qualname}()")
                return

    # -- set iteration ------------------------------------------------------------------------------

    def _names_bound_to_sets(self, scope: ast.AST) -> frozenset[str]:
        """Names that every binding in the scope binds to a set (`s |= ...` keeps a set a set)."""
        bound: dict[str, bool] = {}
        for node in _scope_walk(scope):
            if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Store):
                continue
            parent = self.parents.get(node)
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
            and expr.func.id not in self.aliases
        )

    def _is_set(self, expr: ast.expr) -> bool:
        if self._is_set_literal_or_call(expr):
            return True
        return isinstance(expr, ast.Name) and bool(self._set_names) and expr.id in self._set_names[-1]

    def _consumed_order_free(self, node: ast.AST) -> bool:
        parent = self.parents.get(node)
        return (
            isinstance(parent, ast.Call)
            and node in parent.args
            and isinstance(parent.func, ast.Name)
            and parent.func.id in _ORDER_FREE_CONSUMERS
        )

    def _check_set_consumer(self, node: ast.Call, callee: _Callee) -> None:
        """enumerate(S), list(S), tuple(S) and "sep".join(S), where S is a set literal, a set(...) or
        frozenset(...) call, a set comprehension, or a name bound only to those in this scope.

        Comprehensions over S and loops over S that build a sequence are checked in their visitors;
        sorted(S), len(S), sum(...) and other order-free consumers are fine.
        """
        if not node.args or not self._is_set(node.args[0]):
            return
        bare = isinstance(node.func, ast.Name) and node.func.id not in self.aliases
        numbered = bare and callee.last == "enumerate"
        listed = bare and callee.last in {"list", "tuple"} and not self._consumed_order_free(node)
        joined = isinstance(node.func, ast.Attribute) and node.func.attr == "join" and len(node.args) == 1
        if numbered or listed or joined:
            self.report(node, "set-iteration-order")

    def _check_comprehension(self, node: ast.ListComp | ast.DictComp | ast.GeneratorExp) -> None:
        if self._is_set(node.generators[0].iter) and not self._consumed_order_free(node):
            self.report(node, "set-iteration-order")
        self.generic_visit(node)

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._check_comprehension(node)

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._check_comprehension(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._check_comprehension(node)

    def _visit_for(self, node: ast.For | ast.AsyncFor) -> None:
        # A plain loop over a set matters when it builds an ordered thing: d[key] = ..., out.append(...).
        if self._is_set(node.iter) and _builds_sequence(node):
            self.report(node, "set-iteration-order")
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self._visit_for(node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> None:
        self._visit_for(node)

    # -- uninitialized memory -----------------------------------------------------------------------

    def _is_empty_factory(self, expr: ast.expr) -> bool:
        if not isinstance(expr, ast.Call) or any(_is_const(arg, 0) for arg in expr.args):
            return False  # a dimension of literal 0: no elements to be uninitialized
        callee = self.resolve(expr.func)
        if callee.torch_rooted and callee.last in _EMPTY_FACTORIES:
            return True
        return callee.last == "new_empty" and callee.attribute and not callee.foreign

    def _check_unassigned_empty(self, node: ast.Call, _callee: _Callee) -> None:
        parent = self.parents.get(node)
        if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) or not self._is_empty_factory(node):
            return
        use, at = self._classify_use(node)
        if use == "read":
            self.report(node, "uninitialized-empty", f"{_short(node.func)}() is read on line {at} unfilled")

    def _check_empty_reads(self, scope: ast.AST) -> None:
        """`name = torch.empty(...)` read before anything fills it.

        The first use of the name after the assignment, in source order within the same scope,
        decides: an in-place fill (.zero_(), .fill_(), .normal_(), .copy_(), ...), any store into it
        (`buf[i] = ...`, even partial, so loops that fill a buffer stay quiet), `out=buf`, or an
        `nn.init.*_(buf)` call counts as filled; arithmetic, a reducing or in-place-arithmetic method,
        `buf += ...`, or passing it to a torch function counts as a read and is reported; anything
        else (returning it, passing it to other code, rebinding it) ends the search quietly.
        Metadata (`.shape`, `.size()`, ...) is skipped over, and views (`.view()`, `buf[0]`,
        `.to()`) are followed to their own first use.
        """
        walked = list(_scope_walk(scope))
        for node in walked:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                continue
            factory = node.value
            if not isinstance(factory, ast.Call) or not self._is_empty_factory(factory):
                continue
            name = targets[0].id
            after = (node.end_lineno or node.lineno, node.end_col_offset or 0)
            uses = sorted(
                (n for n in walked if isinstance(n, ast.Name) and n.id == name and _position(n) >= after),
                key=_position,
            )
            for use_node in uses:
                use, at = self._classify_use(use_node)
                if use == "neutral":
                    continue
                if use == "read":
                    detail = f"{name} = {_short(factory.func)}(...) is read on line {at} before it is filled"
                    self.report(factory, "uninitialized-empty", detail)
                break

    def _classify_use(self, expr: ast.expr) -> tuple[Use, int]:
        """Fill, read, escape or neutral: what the code around `expr` does with the tensor."""
        line = getattr(expr, "lineno", 0)
        if isinstance(expr, ast.Name) and not isinstance(expr.ctx, ast.Load):
            parent = self.parents.get(expr)
            augmented = isinstance(parent, ast.AugAssign) and parent.target is expr
            return ("read" if augmented else "escape"), line
        step: Use | ast.expr = expr
        while not isinstance(step, str):
            step = self._follow(step)
        return step, line

    def _follow(self, expr: ast.expr) -> Use | ast.expr:
        """One step outward from `expr`: a verdict, or the view of the tensor to follow next."""
        parent = self.parents.get(expr)
        if isinstance(parent, ast.Subscript) and parent.value is expr:
            if not isinstance(parent.ctx, ast.Store):
                return parent  # buf[i] is a view: its use decides
            grand = self.parents.get(parent)
            return "read" if isinstance(grand, ast.AugAssign) and grand.target is parent else "fill"
        if isinstance(parent, ast.Attribute) and parent.value is expr:
            return self._follow_attribute(parent)
        if isinstance(parent, ast.keyword) or (isinstance(parent, ast.Call) and expr in parent.args):
            if isinstance(parent, ast.keyword) and parent.arg in _OUT_KEYWORDS:
                return "fill"
            call = self.parents.get(parent) if isinstance(parent, ast.keyword) else parent
            return self._classify_argument(call, expr)
        return (
            "read" if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.AugAssign)) else "escape"
        )

    def _follow_attribute(self, attribute: ast.Attribute) -> Use | ast.expr:
        grand = self.parents.get(attribute)
        if attribute.attr in _METADATA:
            return "neutral"
        if isinstance(grand, ast.Call) and grand.func is attribute:
            if attribute.attr in _FILL_METHODS:
                return "fill"
            if attribute.attr in _PARTIAL_WRITE_METHODS:
                return "escape"
            return grand if attribute.attr in _VIEW_METHODS else "read"
        return attribute if attribute.attr in _VIEW_ATTRIBUTES else "escape"

    def _classify_argument(self, call: ast.AST | None, arg: ast.expr) -> Use:
        if not isinstance(call, ast.Call):
            return "escape"
        callee = self.resolve(call.func)
        if callee.torch_rooted and callee.last.endswith("_") and call.args and call.args[0] is arg:
            return "fill"  # torch.nn.init.normal_(w), ...
        qualname = callee.qualname or ""
        writes = any(qualname.startswith(f"{namespace}.") for namespace in _WRITING_NAMESPACES)
        if callee.torch_rooted and not writes and not callee.last.startswith("_"):
            return "escape" if callee.last in _WRAPPING_CONSTRUCTORS else "read"
        if (
            isinstance(call.func, ast.Name)
            and call.func.id in _READING_BUILTINS
            and call.func.id not in self.aliases
        ):
            return "read"
        return "escape"


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
