"""One pass over one file's syntax tree that collects findings.

The scanner matches calls and assignments against the rule tables (`_call_rules`), checks seed values,
and hands scopes, calls, comprehensions and loops to the heuristics: reading a `torch.empty` result
before filling it (`_empty_reads`), building an ordered thing from a set (`_set_order`) or from a
directory listing or completion-ordered results (`_unordered`), run-specific values in file names and
outputs (`_run_values`, which also follows seeds through names), and tokenizers trained by a tokenizer
object (`_tokenizers`). Assignments to torch settings are judged once the whole file is read
(`_Scanner._report_settings`).
"""

from __future__ import annotations

import ast

from reprobox.hazards._call_conditions import always, autotune
from reprobox.hazards._call_rules import (
    ASSIGN_RULES,
    CALL_RULES,
    CLOCK_CALLS,
    ENTROPY_CALLS,
    SEED_CALLS,
    AssignRule,
)
from reprobox.hazards._empty_reads import EmptyReads
from reprobox.hazards._file import FileContext
from reprobox.hazards._run_values import RunValues
from reprobox.hazards._set_order import SetOrder
from reprobox.hazards._syntax import _Callee, _is_const, _position
from reprobox.hazards._tokenizers import TokenizerTraining
from reprobox.hazards._unordered import Unordered


class _Scanner(FileContext, ast.NodeVisitor):
    """One pass over one file's tree; findings accumulate in `self.findings`."""

    def __init__(self, path: str, tree: ast.Module) -> None:
        super().__init__(path, tree)
        self.sets = SetOrder(self)
        self.empty_reads = EmptyReads(self)
        self.unordered = Unordered(self)
        self.run_values = RunValues(self)
        self.tokenizers = TokenizerTraining(self)
        self._math_attention_depth = 0
        self._settings: list[tuple[ast.expr, AssignRule, bool]] = []  # (target, rule, literally safe)

    # -- scopes -------------------------------------------------------------------------------------

    def _enter_scope(self, scope: ast.AST) -> None:
        self.sets.enter_scope(scope)
        self.unordered.enter_scope(scope)
        self.run_values.enter_scope(scope)
        self.empty_reads.check_scope(scope)

    def _leave_scope(self) -> None:
        self.sets.leave_scope()
        self.unordered.leave_scope()
        self.run_values.leave_scope()

    def visit_Module(self, node: ast.Module) -> None:
        self._enter_scope(node)
        self.generic_visit(node)
        self._leave_scope()
        self._report_settings()

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            if not isinstance(decorator, ast.Call) and self.resolve(decorator).qualname == "torch.compile":
                self.report(decorator, "compile")
        self._enter_scope(node)
        self.generic_visit(node)
        self._leave_scope()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.sets.enter_lambda()
        self.unordered.enter_scope(node)
        self.run_values.enter_scope(node)
        self.generic_visit(node)
        self._leave_scope()

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
            detail = (entry.condition or always)(node, callee)
            if detail is not None:
                self.report(node, entry.rule, detail)
        if callee.attribute and not callee.torch_rooted and not callee.foreign and callee.last == "compile":
            detail = autotune(node)  # model.compile(mode="max-autotune"), nn.Module.compile
            if detail:
                self.report(node, "compile-autotune", detail)
        self._check_seed_call(node, callee)
        self.sets.check_consumer(node, callee)
        self.unordered.check_call(node, callee)
        self.run_values.check_call(node, callee)
        self.tokenizers.check_call(node, callee)
        self.empty_reads.check_unassigned(node)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self.run_values.check_division(node)
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
        if callee.last in SEED_CALLS:
            for arg in node.args:
                self._check_seed_value(arg)
        for kw in node.keywords:
            if callee.last in SEED_CALLS or (kw.arg and "seed" in kw.arg.lower()):
                self._check_seed_value(kw.value)

    def _check_seed_value(self, value: ast.expr) -> None:
        for node in ast.walk(value):
            if not isinstance(node, ast.Call):
                continue
            qualname = self.resolve(node.func).qualname or ""
            if qualname in CLOCK_CALLS:
                self.report(value, "seed-from-clock", f"{qualname}()")
                return
            if qualname in ENTROPY_CALLS or qualname.startswith("secrets."):
                self.report(value, "seed-from-entropy", f"{qualname}()")
                return
        self._check_seed_names(value)

    def _check_seed_names(self, value: ast.expr) -> None:
        """A seed read from a name that holds the clock or entropy (`t = time.time()`, then
        `random.seed(t)`); names that say seed are checked where they are assigned instead."""
        for node in ast.walk(value):
            if not isinstance(node, ast.Name) or "seed" in node.id.lower():
                continue
            taint = self.run_values.name_taint(node.id)
            if taint is None:
                continue
            if taint.source == "clock":
                self.report(value, "seed-from-clock", f"{taint.call}(), through {node.id}")
                return
            if taint.source in {"entropy", "pid"}:
                self.report(value, "seed-from-entropy", f"{taint.call}(), through {node.id}")
                return

    # -- set iteration: checked by SetOrder ---------------------------------------------------------

    def _visit_comprehension(self, node: ast.ListComp | ast.DictComp | ast.GeneratorExp) -> None:
        self.sets.check_comprehension(node)
        self.generic_visit(node)

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._visit_comprehension(node)

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._visit_comprehension(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._visit_comprehension(node)

    def _visit_for(self, node: ast.For | ast.AsyncFor) -> None:
        self.sets.check_loop(node)
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self._visit_for(node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> None:
        self._visit_for(node)
