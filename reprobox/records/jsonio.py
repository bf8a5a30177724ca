"""JSON from someone else (attestations, a bundle's index) parsed with its nesting bounded.

``json.loads`` recurses once per level: a file of a million ``[`` ends in a RecursionError, and a
structure a few hundred levels deep parses but breaks the recursive code that walks it later. Every
document reprobox reads from an author is far shallower than MAX_JSON_DEPTH.
"""

from __future__ import annotations

import json
from typing import Any

MAX_JSON_DEPTH = 64  # an attestation nests about 8 levels; a bundle index 4


class JsonTooDeep(ValueError):
    """The document nests deeper than MAX_JSON_DEPTH (or than the parser can recurse)."""


def loads_bounded(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads`, refusing a document nested deeper than `max_depth` with JsonTooDeep.

    Other malformed input raises what `json.loads` raises (JSONDecodeError, UnicodeDecodeError).
    """
    try:
        document = json.loads(text)
    except RecursionError:
        raise JsonTooDeep(f"nests deeper than {max_depth} levels") from None
    if json_depth(document) > max_depth:
        raise JsonTooDeep(f"nests deeper than {max_depth} levels")
    return document


def json_depth(document: Any) -> int:
    """How deeply lists and objects nest in a parsed document (a scalar is 0), found without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(document, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest
