"""The `uninitialized-empty` heuristic: a `torch.empty` result read before anything fills it.

`torch.empty` returns whatever the allocator's memory held, which differs from run to run; reading it
before a fill makes results differ. What counts as a fill, a read or an escape is described at
`EmptyReads.check_scope`.
"""

from __future__ import annotations

import ast
from typing import Literal

from reprobox.hazards._file import FileContext
from reprobox.hazards._syntax import _is_const, _names, _position, _scope_walk, _short

# How a use of a torch.empty result is classified (see EmptyReads.check_scope).
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

Use = Literal["fill", "read", "escape", "neutral"]


class EmptyReads:
    """Finds reads of uninitialized `torch.empty` results in one file, scope by scope."""

    def __init__(self, file: FileContext) -> None:
        self.file = file

    def check_scope(self, scope: ast.AST) -> None:
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
                    self.file.report(factory, "uninitialized-empty", detail)
                break

    def check_unassigned(self, node: ast.Call) -> None:
        """`torch.empty(...)` used right away, unassigned, in a way that reads it."""
        parent = self.file.parents.get(node)
        if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) or not self._is_empty_factory(node):
            return
        use, at = self._classify_use(node)
        if use == "read":
            self.file.report(
                node, "uninitialized-empty", f"{_short(node.func)}() is read on line {at} unfilled"
            )

    def _is_empty_factory(self, expr: ast.expr) -> bool:
        if not isinstance(expr, ast.Call) or any(_is_const(arg, 0) for arg in expr.args):
            return False  # a dimension of literal 0: no elements to be uninitialized
        callee = self.file.resolve(expr.func)
        if callee.torch_rooted and callee.last in _EMPTY_FACTORIES:
            return True
        return callee.last == "new_empty" and callee.attribute and not callee.foreign

    def _classify_use(self, expr: ast.expr) -> tuple[Use, int]:
        """Fill, read, escape or neutral: what the code around `expr` does with the tensor."""
        line = getattr(expr, "lineno", 0)
        if isinstance(expr, ast.Name) and not isinstance(expr.ctx, ast.Load):
            parent = self.file.parents.get(expr)
            augmented = isinstance(parent, ast.AugAssign) and parent.target is expr
            return ("read" if augmented else "escape"), line
        step: Use | ast.expr = expr
        while not isinstance(step, str):
            step = self._follow(step)
        return step, line

    def _follow(self, expr: ast.expr) -> Use | ast.expr:
        """One step outward from `expr`: a verdict, or the view of the tensor to follow next."""
        parent = self.file.parents.get(expr)
        if isinstance(parent, ast.Subscript) and parent.value is expr:
            if not isinstance(parent.ctx, ast.Store):
                return parent  # buf[i] is a view: its use decides
            grand = self.file.parents.get(parent)
            return "read" if isinstance(grand, ast.AugAssign) and grand.target is parent else "fill"
        if isinstance(parent, ast.Attribute) and parent.value is expr:
            return self._follow_attribute(parent)
        if isinstance(parent, ast.keyword) or (isinstance(parent, ast.Call) and expr in parent.args):
            if isinstance(parent, ast.keyword) and parent.arg in _OUT_KEYWORDS:
                return "fill"
            call = self.file.parents.get(parent) if isinstance(parent, ast.keyword) else parent
            return self._classify_argument(call, expr)
        return (
            "read" if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.AugAssign)) else "escape"
        )

    def _follow_attribute(self, attribute: ast.Attribute) -> Use | ast.expr:
        grand = self.file.parents.get(attribute)
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
        callee = self.file.resolve(call.func)
        if callee.torch_rooted and callee.last.endswith("_") and call.args and call.args[0] is arg:
            return "fill"  # torch.nn.init.normal_(w), ...
        qualname = callee.qualname or ""
        writes = any(qualname.startswith(f"{namespace}.") for namespace in _WRITING_NAMESPACES)
        if callee.torch_rooted and not writes and not callee.last.startswith("_"):
            return "escape" if callee.last in _WRAPPING_CONSTRUCTORS else "read"
        if (
            isinstance(call.func, ast.Name)
            and call.func.id in _READING_BUILTINS
            and call.func.id not in self.file.aliases
        ):
            return "read"
        return "escape"
