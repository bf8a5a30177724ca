"""The constant a call site adds to its clock reading: ``start = default_timer() - 0.00001`` (gensim's
training loop) holds the reading minus 10 us, so a duration measured from it is a difference of two
readings plus that constant, and only the value the script held explains it.

Worked out once per site when the record is written (``readings.Recorder.to_json``), never per reading:
the site's source file is parsed (``ast``) and its line read for a clock call that takes no arguments,
the operand of a ``+`` or ``-`` whose other operand is a number written in the code (``reading - 0.5``,
``reading + 5``, ``5 + reading``, ``reading - -1``). Only this form is taken: the value held is then the
reading moved by a constant in the clock's own unit, computed as the script computes it. Anything else is
left as read: a scale (``perf_counter() * 1000``) changes the unit, which the judges already try on the
difference (``(t1 - t0) * 1000``); a name (``time() - offset``) is no constant the code shows; and a line
with two calls that take no arguments is ambiguous. The expression must be the one the running code was
compiled from: the ``+`` or ``-`` must stand at a position the site's code object holds
(``co_positions``, Python 3.11 and later; older Pythons record no offsets). A file over
``MAX_SOURCE_BYTES`` or not readable records none.
"""

from __future__ import annotations

TYPE_CHECKING = False  # imported at a process's exit only: typing costs more than this
if TYPE_CHECKING:
    import ast
    from collections.abc import Iterable
    from typing import Any

MAX_SOURCE_BYTES = 1 << 20


def site_offsets(sites: Iterable[tuple[Any, int]]) -> dict[str, int | float]:
    """Site index (as a string, the record's JSON key) -> the constant added to its readings, for the
    sites ``(code, line)`` whose clock call is moved by a number written in the code."""
    found: dict[str, int | float] = {}
    sources: dict[str, tuple[list[bytes], dict[int, list[tuple[Any, Any]]] | None] | None] = {}
    for site, index in sites:
        if not isinstance(site, tuple) or len(site) != 2:  # a datetime's site, or no Python frame
            continue
        code, line = site
        offset = _offset(code, line, sources)
        if offset is not None:
            found[str(index)] = offset
    return found


def _offset(code: Any, line: int, sources: dict[str, Any]) -> int | float | None:
    positions = getattr(code, "co_positions", None)
    filename = getattr(code, "co_filename", "")
    if positions is None or not isinstance(line, int):
        return None
    if filename not in sources:
        sources[filename] = _source(filename)
    source = sources[filename]
    if source is None or not 0 < line <= len(source[0]):
        return None
    lines, calls = source
    text = lines[line - 1]
    if b"(" not in text or (b"-" not in text and b"+" not in text):  # no call moved by a sign: not parsed
        return None
    if calls is None:
        calls = source[1] = _calls_by_line(b"\n".join(lines))
    found = calls.get(line, [])
    if len(found) != 1:
        return None
    call, parent = found[0]
    offset = _literal_offset(call, parent)
    if offset is None:
        return None
    where = (parent.lineno, parent.end_lineno, parent.col_offset, parent.end_col_offset)
    return offset if where in set(positions()) else None


def _source(filename: str) -> list[Any] | None:
    """The file's lines, and room for its calls by line (parsed when first needed)."""
    try:
        with open(filename, "rb") as handle:  # noqa: PTH123 - no pathlib in the guest's exit path
            data = handle.read(MAX_SOURCE_BYTES + 1)
    except (OSError, ValueError):
        return None
    if len(data) > MAX_SOURCE_BYTES:
        return None
    return [data.splitlines(), None]


def _calls_by_line(data: bytes) -> dict[int, list[tuple[Any, Any]]]:
    """Each call of no arguments with the node it is an operand of, by the lines it may be read at (its
    own first line, and the line of a method's name)."""
    import ast

    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    found: dict[int, list[tuple[Any, Any]]] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call) and not child.args and not child.keywords:
                lines = {child.lineno, getattr(child.func, "end_lineno", child.lineno)}
                for line in lines:
                    found.setdefault(line, []).append((child, node))
    return found


def _literal_offset(call: ast.Call, parent: ast.AST) -> int | float | None:
    """What ``parent`` adds to the call's value: a number written in the code, added or subtracted."""
    import ast

    if not isinstance(parent, ast.BinOp) or not isinstance(parent.op, ast.Add | ast.Sub):
        return None
    if parent.left is call:
        number = _number(parent.right)
        if number is None:
            return None
        return number if isinstance(parent.op, ast.Add) else -number
    if parent.right is call and isinstance(parent.op, ast.Add):
        return _number(parent.left)
    return None


def _number(node: ast.AST) -> int | float | None:
    """An int or float written in the code (``5``, ``0.00001``, ``-1e-5``), never a bool."""
    import ast

    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        sign = -1 if isinstance(node.op, ast.USub) else 1
        node = node.operand
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return sign * value
    return None
