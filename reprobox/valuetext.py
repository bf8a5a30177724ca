"""How a recorded value or number is spelled for a person, in every rendering, and in JSON.

One place so the terminal, the report documents, `reproduce`'s summary and the stack explanation
show the same fingerprint field, tensor statistic or output value the same way. The guest's own
fingerprint table (`reprobox.guest.fingerprint`) cannot import the controller and keeps its spelling.
"""

from __future__ import annotations

import json

from reprobox.guest.fingerprint import is_absent

UNSET = "unset"
BLANK = "-"  # a table cell with nothing to show


def show_value(value: object, *, none: str = UNSET) -> str:
    """A fingerprint field or output value in one line: ``absent (why)``, lists joined, mappings as JSON.

    ``none`` is what a null reads as: ``unset`` in a sentence, ``-`` in a table cell where a field
    may simply be missing.
    """
    if is_absent(value):
        return f"absent ({value['absent']})"
    if value is None:
        return none
    if isinstance(value, list):
        return ", ".join(show_value(item, none=none) for item in value) if value else "(none)"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def show_number(value: float | None) -> str:
    """A measured difference to three significant digits; ``-`` when there is none."""
    return BLANK if value is None else f"{value:.3g}"
