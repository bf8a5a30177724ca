"""Safe YAML loading that remembers where each value came from, so errors can name file:line.

A job file (or the job text inside an attestation) may come from someone else, so parsing is bounded:
the document's size, its nesting, and the size it expands to through anchors and aliases (a
"billion laughs" file is a few hundred bytes that expand to 10**9 values) are all capped, and an alias
that refers to its own anchor is refused, before anything walks or builds the document.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from reprobox.errors import Problem, SpecError

MAX_YAML_BYTES = 1 << 20  # job files are a few KiB; a larger one is a mistake or an attack
MAX_YAML_DEPTH = 64  # nesting, counted through aliases
MAX_YAML_NODES = 100_000  # values once every alias is expanded in place


class _Refused(Exception):
    """A bound was crossed while composing; carries the line and the reason."""

    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader, refusing nesting beyond MAX_YAML_DEPTH while composing (which recurses), and
    more than MAX_YAML_NODES values as they are composed, not after the whole graph is built."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0  # composed so far, aliases included: the count stops a long document early

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        self._nodes += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise _Refused(mark.line + 1, f"nests deeper than {MAX_YAML_DEPTH} levels")
            if self._nodes > MAX_YAML_NODES:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise _Refused(mark.line + 1, f"holds more than {MAX_YAML_NODES} values")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


@dataclass(frozen=True)
class Located:
    """A parsed document plus the line of every dotted path in it (`data.0.source` -> 7)."""

    path: Path
    data: Any
    lines: dict[str, int]
    duplicates: tuple[tuple[str, int], ...]

    def line(self, dotted: str) -> int | None:
        """The line of `dotted`, or of its nearest enclosing value that has one."""
        while dotted:
            if dotted in self.lines:
                return self.lines[dotted]
            dotted = dotted.rpartition(".")[0]
        return self.lines.get("", 1)

    def problem(self, dotted: str, message: str) -> Problem:
        return Problem(self.path, self.line(dotted), dotted, message)


def load_yaml(path: Path) -> Located:
    """Parse `path` with the safe loader; a syntax error or a crossed bound is a SpecError naming the line."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_YAML_BYTES + 1)
    except FileNotFoundError:
        raise SpecError([Problem(path, None, "", "file not found; check the path")]) from None
    except OSError as exc:
        raise SpecError([Problem(path, None, "", f"cannot be read ({exc.strerror})")]) from None
    if len(raw) > MAX_YAML_BYTES:
        raise SpecError(
            [Problem(path, None, "", f"is larger than {MAX_YAML_BYTES} bytes, too large for a job file")]
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError([Problem(path, None, "", "cannot be read (not valid UTF-8 text)")]) from None
    return parse_yaml(text, path)


def parse_yaml(text: str, path: Path, *, max_bytes: int = MAX_YAML_BYTES) -> Located:
    """Parse YAML `text` read from `path` (a file, or the file that embeds it) within the same bounds."""
    if len(text) > max_bytes:
        raise SpecError(
            [
                Problem(
                    path,
                    None,
                    "",
                    f"is larger than {max_bytes} bytes, more than reprobox reads; make it smaller",
                )
            ]
        )
    try:
        loader = _BoundedLoader(text)  # the reader checks characters here: a NUL byte raises at once
    except yaml.YAMLError as exc:
        raise SpecError(
            [Problem(path, None, "", f"is not valid YAML ({str(exc).splitlines()[0]}); fix the file")]
        ) from None
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_expansion(node)
        data = loader.construct_document(node) if node is not None else None
    except _Refused as exc:
        raise SpecError(
            [Problem(path, exc.line, "", f"{exc.reason}; refused, write the values out plainly")]
        ) from None
    except (ValueError, TypeError, OverflowError) as exc:  # a tagged value that does not convert
        raise SpecError(
            [Problem(path, None, "", f"holds a value YAML cannot convert ({exc}); fix it")]
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError([Problem(path, line, "", f"is not valid YAML ({reason}); fix the syntax")]) from None
    finally:
        loader.dispose()
    lines: dict[str, int] = {}
    duplicates: list[tuple[str, int]] = []
    if node is not None:
        _walk(node, "", lines, duplicates)
    return Located(path, data, lines, tuple(duplicates))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a node graph that refers to itself, or expands (aliases copied in place) past the bounds.

    Measured once per distinct node, without recursion, so the check costs what the text costs.
    """
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded values, depth), both capped
    open_nodes: set[int] = set()  # the current path from the root: an alias to one of them is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            sizes = [measured[id(c)] for c in _children(node)]
            count = min(1 + sum(s for s, _ in sizes), MAX_YAML_NODES + 1)
            depth = 1 + max((d for _, d in sizes), default=0)
            line = node.start_mark.line + 1
            if count > MAX_YAML_NODES:
                raise _Refused(line, f"expands to more than {MAX_YAML_NODES} values through its aliases")
            if depth > MAX_YAML_DEPTH:
                raise _Refused(line, f"nests deeper than {MAX_YAML_DEPTH} levels through its aliases")
            measured[key] = (count, depth)
            open_nodes.discard(key)
            continue
        if key in measured:
            continue
        if key in open_nodes:
            raise _Refused(node.start_mark.line + 1, "has an alias that refers to its own anchor")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in measured)


def _walk(node: yaml.Node, prefix: str, lines: dict[str, int], duplicates: list[tuple[str, int]]) -> None:
    lines.setdefault(prefix, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            dotted = f"{prefix}.{key}" if prefix else key
            if key in seen:
                duplicates.append((dotted, key_node.start_mark.line + 1))
            seen.add(key)
            lines[dotted] = key_node.start_mark.line + 1
            _walk(value_node, dotted, lines, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            dotted = f"{prefix}.{index}" if prefix else str(index)
            lines[dotted] = item.start_mark.line + 1
            _walk(item, dotted, lines, duplicates)
