"""The `run-specific-name` and `random-name` heuristics: values that change from run to run (the clock,
entropy, a temporary folder's name) or from machine to machine (host name, process id), put into the
name of a file the job writes or into what it writes.

Each scope's names are followed, flow-insensitively, from such a call through assignments (`stamp =
time.strftime(...)`, `name = f"ckpt-{stamp}.pt"`); a function sees the module's names it does not bind
itself. A value is followed only through calls that keep it (str(), f-strings, os.path.join, .format,
.strftime, ...), never through ones that compute something else from it (len(os.listdir(tmp))).
Where a value counts is `_SINK_RULES`: the clock only in file names (timestamps and durations written
into logs and metrics are the verdict's run-specific values), a temporary folder only when its name is
written into an output (using it as a path is what it is for).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import Literal

from reprobox.hazards._call_rules import CLOCK_CALLS
from reprobox.hazards._file import FileContext
from reprobox.hazards._syntax import _arg, _Callee, _names, _scope_walk

Source = Literal["clock", "host", "pid", "entropy", "tempname"]
Sink = Literal["path", "value"]


@dataclass(frozen=True)
class Taint:
    """Where a value came from: the kind of source and the call that produced it."""

    source: Source
    call: str
    text: bool = False  # the value is text (a formatted date, an f-string), so `folder / value` names a file


# Calls that read the clock only when given no time of their own: (name, largest argument count).
_CLOCK_FORMATTERS = {
    "time.strftime": 1,
    "time.localtime": 0,
    "time.gmtime": 0,
    "time.ctime": 0,
    "time.asctime": 0,
}
_SOURCES: dict[str, Source] = {
    **dict.fromkeys(("socket.gethostname", "socket.getfqdn", "platform.node", "os.uname"), "host"),
    **dict.fromkeys(("os.getpid", "os.getppid"), "pid"),
    **dict.fromkeys(("uuid.uuid1", "uuid.uuid4", "os.urandom", "os.getrandom"), "entropy"),
    **dict.fromkeys(
        (
            "tempfile.mkdtemp",
            "tempfile.mkstemp",
            "tempfile.mktemp",
            "tempfile.NamedTemporaryFile",
            "tempfile.TemporaryDirectory",
        ),
        "tempname",
    ),
}
# Sources whose value is already text, so `folder / stamp` names a file.
_TEXT_SOURCES = _names(
    "time.strftime time.ctime time.asctime socket.gethostname socket.getfqdn platform.node"
)
# (sink, source) -> rule; pairs not listed are not hazards.
_SINK_RULES: dict[tuple[Sink, Source], str] = {
    ("path", "clock"): "run-specific-name",
    ("path", "host"): "run-specific-name",
    ("path", "pid"): "run-specific-name",
    ("value", "host"): "run-specific-name",
    ("value", "pid"): "run-specific-name",
    ("path", "entropy"): "random-name",
    ("value", "entropy"): "random-name",
    ("value", "tempname"): "random-name",
}

# Calls that hand a value on (a path or text made from it): their arguments and receiver are followed.
_CARRIER_FUNCTIONS = _names(
    "str repr format int float hex bytes os.path.join os.path.abspath os.path.realpath os.path.basename "
    "pathlib.Path pathlib.PurePath pathlib.PosixPath json.dumps"
)
_CARRIER_METHODS = _names(
    "format strftime isoformat timestamp join replace lower upper strip encode decode hex joinpath "
    "with_name with_stem with_suffix as_posix resolve absolute"
)

# Where a file is named: call -> positions (None: every positional argument) and keywords of the path.
_PATH_FUNCTIONS: dict[str, tuple[tuple[int, ...] | None, tuple[str, ...]]] = {
    "open": ((0,), ("file",)),
    "io.open": ((0,), ("file",)),
    "pathlib.Path": (None, ()),
    "pathlib.PurePath": (None, ()),
    "os.path.join": (None, ()),
    "os.makedirs": ((0,), ("name",)),
    "os.mkdir": ((0,), ("path",)),
    "os.rename": ((1,), ("dst",)),
    "os.replace": ((1,), ("dst",)),
    "shutil.copy": ((1,), ("dst",)),
    "shutil.copyfile": ((1,), ("dst",)),
    "shutil.copytree": ((1,), ("dst",)),
    "shutil.move": ((1,), ("dst",)),
    "torch.save": ((1,), ("f",)),
    "numpy.save": ((0,), ("file",)),
    "numpy.savez": ((0,), ("file",)),
    "numpy.savez_compressed": ((0,), ("file",)),
    "numpy.savetxt": ((0,), ("fname",)),
}
_PATH_METHODS = _names(
    "save save_pretrained save_model save_checkpoint savefig to_csv to_json to_parquet to_pickle joinpath "
    "with_name with_stem"
)
# Where a value is written into an output: call -> positions and keywords of the value.
_VALUE_FUNCTIONS: dict[str, tuple[tuple[int, ...] | None, tuple[str, ...]]] = {
    "json.dump": ((0,), ("obj",)),
    "pickle.dump": ((0,), ("obj",)),
    "torch.save": ((0,), ("obj",)),
    "numpy.save": ((1,), ("arr",)),
    "numpy.savetxt": ((1,), ("X",)),
    "yaml.dump": ((0,), ("data",)),
    "yaml.safe_dump": ((0,), ("data",)),
}
_VALUE_METHODS = _names("write writelines writerow writerows write_text write_bytes")
# Attributes that keep only a fixed part of a path: the folder of a temporary file is TMPDIR.
_DROPS_NAME = _names("parent parents suffix suffixes")


class RunValues:
    """Follows run-specific values through one file, scope by scope, and reports where they are written."""

    def __init__(self, file: FileContext) -> None:
        self.file = file
        self.scopes: list[tuple[set[str], dict[str, Taint]]] = []  # (names bound, their taints)
        self._reported: set[tuple[int, str]] = set()  # one finding per line and rule

    def enter_scope(self, scope: ast.AST) -> None:
        bindings, bound = _bindings(scope)
        taints: dict[str, Taint] = {}
        self.scopes.append((bound, taints))
        for _ in range(len(bindings) + 1):  # until nothing changes: each pass can only add names
            before = len(taints)
            for name, value in bindings:
                if name not in taints and (taint := self.taint_of(value)) is not None:
                    taints[name] = replace(taint, text=self._is_text(value))
            if len(taints) == before:
                break

    def leave_scope(self) -> None:
        self.scopes.pop()

    def name_taint(self, name: str) -> Taint | None:
        """The taint of `name` where it is read now: the innermost scope that binds it decides."""
        for bound, taints in reversed(self.scopes):
            if name in bound:
                return taints.get(name)
        return None

    def taint_of(self, expr: ast.AST) -> Taint | None:
        """The first run-specific source `expr` is made from, followed through carriers only."""
        if isinstance(expr, ast.Name):
            return self.name_taint(expr.id) if isinstance(expr.ctx, ast.Load) else None
        if isinstance(expr, ast.Lambda) or (isinstance(expr, ast.Attribute) and expr.attr in _DROPS_NAME):
            return None
        if isinstance(expr, ast.Call):
            callee = self.file.resolve(expr.func)
            source = self._source(expr, callee)
            if source is not None:
                call = callee.qualname or callee.last
                return Taint(source, call, text=call in _TEXT_SOURCES)
            if not self._carries(expr, callee):
                return None
        for child in ast.iter_child_nodes(expr):
            taint = self.taint_of(child)
            if taint is not None:
                return taint
        return None

    def _source(self, call: ast.Call, callee: _Callee) -> Source | None:
        qualname = callee.qualname or ""
        if qualname in CLOCK_CALLS:
            return "clock"
        if qualname in _CLOCK_FORMATTERS and len(call.args) <= _CLOCK_FORMATTERS[qualname]:
            return "clock"
        if qualname.startswith("secrets."):
            return "entropy"
        return _SOURCES.get(qualname)

    def _carries(self, call: ast.Call, callee: _Callee) -> bool:
        if isinstance(call.func, ast.Name) and call.func.id not in self.file.aliases:
            return call.func.id in _CARRIER_FUNCTIONS
        if callee.qualname in _CARRIER_FUNCTIONS:
            return True
        return isinstance(call.func, ast.Attribute) and call.func.attr in _CARRIER_METHODS

    # -- sinks --------------------------------------------------------------------------------------

    def check_call(self, node: ast.Call, callee: _Callee) -> None:
        qualname = callee.qualname or ""
        bare = isinstance(node.func, ast.Name) and node.func.id not in self.file.aliases
        name = node.func.id if bare and isinstance(node.func, ast.Name) else qualname
        method = isinstance(node.func, ast.Attribute) and not callee.foreign and not callee.torch_rooted
        if name in _PATH_FUNCTIONS:
            self._check(node, _arguments(node, *_PATH_FUNCTIONS[name]), "path")
        elif method and callee.last in _PATH_METHODS:
            self._check(node, node.args[:1], "path")
        if name in _VALUE_FUNCTIONS:
            self._check(node, _arguments(node, *_VALUE_FUNCTIONS[name]), "value")
        elif method and callee.last in _VALUE_METHODS:
            self._check(node, node.args[:1], "value")
        elif bare and name == "print" and not _is_console(_arg(node, "file", None)):
            self._check(node, list(node.args), "value")

    def check_division(self, node: ast.BinOp) -> None:
        """`folder / name` names a file when `name` is text (an f-string, str(...), a formatted date)."""
        if isinstance(node.op, ast.Div):
            self._check(node, [side for side in (node.left, node.right) if self._is_text(side)], "path")

    def _is_text(self, expr: ast.expr) -> bool:
        if isinstance(expr, ast.JoinedStr) or (
            isinstance(expr, ast.Constant) and isinstance(expr.value, str)
        ):
            return True
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Mod)):
            return self._is_text(expr.left) or self._is_text(expr.right)
        if isinstance(expr, ast.Call):
            func = expr.func
            named = isinstance(func, ast.Name) and func.id in {"str", "format"}
            return named or (
                isinstance(func, ast.Attribute) and func.attr in {"strftime", "isoformat", "format"}
            )
        if isinstance(expr, ast.Name):
            taint = self.name_taint(expr.id)
            return taint is not None and taint.text
        return isinstance(expr, ast.Attribute) and expr.attr in {"hex", "name"}

    def _check(self, node: ast.AST, values: list[ast.expr], sink: Sink) -> None:
        for value in values:
            taint = self.taint_of(value)
            if taint is None:
                continue
            rule = _SINK_RULES.get((sink, taint.source))
            line = getattr(node, "lineno", 0)
            if rule is None or (line, rule) in self._reported:
                continue
            self._reported.add((line, rule))
            self.file.report(node, rule, _detail(sink, taint))
            return


def _detail(sink: Sink, taint: Taint) -> str:
    if sink == "path":
        return f"A file name is built from {taint.call}()"
    if taint.source == "tempname":
        return f"The random name from {taint.call}() is written into an output"
    return f"{taint.call}() is written into an output"


def _arguments(
    call: ast.Call, positions: tuple[int, ...] | None, keywords: tuple[str, ...]
) -> list[ast.expr]:
    if positions is None:
        found = [arg for arg in call.args if not isinstance(arg, ast.Starred)]
    else:
        found = [
            call.args[i]
            for i in positions
            if i < len(call.args) and not isinstance(call.args[i], ast.Starred)
        ]
    return found + [kw.value for kw in call.keywords if kw.arg in keywords]


def _bindings(scope: ast.AST) -> tuple[list[tuple[str, ast.expr]], set[str]]:
    """(name, value) for each binding of a plain name in the scope (tuple targets share the value), and
    every name the scope binds, parameters and loop targets too: a function's own names hide the module's."""
    found: list[tuple[str, ast.expr]] = []
    bound: set[str] = set()
    for node in _scope_walk(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arguments):
            every = [*node.posonlyargs, *node.args, *node.kwonlyargs, node.vararg, node.kwarg]
            bound.update(arg.arg for arg in every if arg is not None)
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets, value = [node.optional_vars], node.context_expr
        if value is None:
            continue
        for target in targets:
            elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            found.extend((element.id, value) for element in elements if isinstance(element, ast.Name))
    return found, bound


def _is_console(stream: ast.expr | None) -> bool:
    """No file, or sys.stdout / sys.stderr: what print writes there is the log, not an output."""
    return stream is None or (isinstance(stream, ast.Attribute) and stream.attr in {"stdout", "stderr"})
