"""Safe YAML loading that remembers where each value came from, so errors can name file:line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from reprobox.errors import Problem, SpecError


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
    """Parse `path` with the safe loader; a syntax error becomes a SpecError naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([Problem(path, None, "", "file not found; check the path")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not valid UTF-8 text"
        raise SpecError([Problem(path, None, "", f"cannot be read ({reason})")]) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError([Problem(path, line, "", f"is not valid YAML ({reason}); fix the syntax")]) from None
    lines: dict[str, int] = {}
    duplicates: list[tuple[str, int]] = []
    if node is not None:
        _walk(node, "", lines, duplicates)
    return Located(path, data, lines, tuple(duplicates))


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
