"""The plain values of an output file, read at compare time to name and judge what differs.

Manifests hold only digests of non-tensor values (values may be secrets); when two digests differ, the
verdict needs both values: to print ``val_acc 0.912 vs 0.934``, and to tell a run-specific value (a
duration, the run's own path) from a real difference. They are read here from the runs' output files,
with the same safe readers hashing uses (nothing is unpickled). Values under secret-looking keys are
shown redacted.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

from reprobox import saferead
from reprobox.jobfile import REDACTED, SECRET_PATTERN

MAX_SHOWN_CHARS = 200
MAX_TEXT_COMPARE_BYTES = 16 << 20
"""Opaque files up to this size are compared as text (masked line by line) when both decode as UTF-8."""


def output_file(output_dir: Path, relative: str) -> Path | None:
    """The output file a record names, or None unless it is a regular file inside ``output_dir``.

    Records come from what the job wrote, so the name is untrusted: no absolute path, no ``..``, and
    the same check as every record reprobox reads (``saferead``): no FIFO or device to block on, and no
    symbolic link on the way unless it leads to another output (W&B's ``wandb/debug.log`` links to its
    run folder's log): then that file is read, with the same checks.
    """
    target = link_target(output_dir, relative)
    if target is None:
        return None
    path = output_dir.joinpath(*Path(target).parts)
    try:
        os.close(saferead.open_regular(path, root=output_dir))
    except (OSError, saferead.UnsafeFile):
        return None
    return path


def link_target(output_dir: Path, relative: str) -> str | None:
    """The output a recorded name stands for, relative to ``output_dir``: the name itself, or where its
    symbolic links lead when that is inside the outputs; None for a name that leaves them."""
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or ".." in parts:
        return None
    path = output_dir.joinpath(*parts)
    try:
        root = output_dir.resolve(strict=True)
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if resolved == path.absolute() or resolved == root / Path(*parts):
        return relative
    try:
        return resolved.relative_to(root).as_posix()
    except ValueError:
        return None


def load_values(path: Path) -> dict[str, object] | None:
    """Name -> value for the file's non-tensor values, or None when they cannot be read safely."""
    from reprobox.guest.hashing import load_values as read_back  # the readers that gave the digests

    try:
        return read_back(path)
    except Exception:  # noqa: BLE001 - unreadable values leave the difference unexplained, never crash
        return None


def read_text(path: Path) -> str | None:
    """A small output file's text, or None when it is large, binary or unreadable."""
    try:
        return saferead.read_bytes(path, MAX_TEXT_COMPARE_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError, saferead.UnsafeFile):
        return None


def shown(name: str, value: object) -> Any:
    """A JSON-safe, bounded form of a value for verdicts: secrets redacted, long values cut."""
    if SECRET_PATTERN.search(re.split(r"[./]", name)[-1]):  # its own name: not the member, table or row key
        return REDACTED
    text: object
    if value is None or isinstance(value, bool | int | str):
        text = value
    elif isinstance(value, float):
        text = value if math.isfinite(value) else repr(value)
    else:
        text = repr(value)
    if isinstance(text, str) and len(text) > MAX_SHOWN_CHARS:
        return text[: MAX_SHOWN_CHARS - 3] + "..."
    return text


def first_differing_line(text_a: str, text_b: str) -> tuple[int, str, str]:
    """The first line (1-based) where two texts differ, with both lines (empty past the end)."""
    lines_a, lines_b = text_a.splitlines(), text_b.splitlines()
    for index in range(max(len(lines_a), len(lines_b))):
        left = lines_a[index] if index < len(lines_a) else ""
        right = lines_b[index] if index < len(lines_b) else ""
        if left != right:
            return index + 1, left, right
    return 0, "", ""
