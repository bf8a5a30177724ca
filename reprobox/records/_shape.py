"""The checks every record reader shares: JSON types by field, and the sentence for a foreign version.

Light on purpose (no typing, no dataclasses at run time): the guest's trail writer imports it in every
job process.
"""

from __future__ import annotations

from reprobox._version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, TypeGuard

# what a field may hold, by name: the JSON types checked by `wrong_type`
TEXT = (str,)
WHOLE = (int,)
NUMBER = (int, float)
FLAG = (bool,)
OBJECT = (dict,)
ARRAY = (list,)


def is_int(value: Any) -> TypeGuard[int]:
    """A JSON whole number (JSON's true and false are not numbers, though Python's bool is an int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def wrong_type(data: Mapping[str, Any], fields: Mapping[str, tuple[type, ...]]) -> str | None:
    """What is wrong with the types of `data`'s fields, or None; absent or null fields are fine."""
    for name, types in fields.items():
        value = data.get(name)
        if value is None:
            continue
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"has {name} of type {type(value).__name__}, which reprobox never writes"
    return None


def all_text(values: Any) -> bool:
    return isinstance(values, list) and all(isinstance(value, str) for value in values)


def unknown_version(found: Any, expected: str, prefix: str, todo: str, stranger: str) -> str:
    """What follows "is" or "has schema" for a schema this reprobox does not read: a version of ours
    says what to do (`todo`), anything else asks whether the file is one of ours at all (`stranger`)."""
    if isinstance(found, str) and found.startswith(prefix):
        return (
            f"{found!r}, a version this reprobox ({__version__}) does not read (it reads {expected!r}); "
            + todo
        )
    return f"{found!r}, expected {expected!r}; {stranger}"
