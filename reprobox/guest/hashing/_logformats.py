"""Logging tools' files read as named values: TensorBoard event files, MLflow's file store, W&B runs.

These files are neither checkpoints nor plain text: hashed as bytes, the clock each logged value carries
makes every run "differ" and hides whether any number did. Each format has its reader (``_tensorboard``,
``_mlflow``, ``_wandb``, on the wire-format reader ``_protowire``); here is which file goes to which,
the plan hashing makes of it, and the values ``reprobox.outputvalues`` reads back at compare time, from
the same reader, so that the manifest's digests and the compared values are of the same names. A file
that does not read (damaged, cut short, too large, a checksum that fails) is compared as bytes, with a
note saying why, as ``_text.plan_text`` does for JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reprobox.guest.hashing import _mlflow, _tensorboard, _wandb
from reprobox.guest.hashing._arrays import _Content, _opaque
from reprobox.guest.hashing._bounds import limit_reason, over_limit
from reprobox.guest.hashing._canonical import _metadata_digests

Reader = Callable[[Path], list[tuple[str, object]]]

LOG_FORMATS: dict[str, tuple[str, str, Reader]] = {
    # format: (what it is, in words; the reader's name for the manifest; the reader)
    "tensorboard": ("TensorBoard event file", _tensorboard.READER_NAME, _tensorboard.read_events),
    "mlflow": ("MLflow file store entry", _mlflow.READER_NAME, _mlflow.read_mlflow),
    "wandb": ("W&B run file", _wandb.READER_NAME, _wandb.read_wandb),
}


def log_format_of(path: Path) -> str | None:
    """The logging tool a file belongs to, from its name and place alone, or None."""
    if _tensorboard.is_event_file(path):
        return "tensorboard"
    if _wandb.is_wandb_file(path):
        return "wandb"
    if _mlflow.mlflow_entry(path) is not None:
        return "mlflow"
    return None


def read_log_values(path: Path) -> list[tuple[str, object]]:
    """The file's values as (name, value) pairs; ValueError says why they cannot be read."""
    kind = log_format_of(path)
    if kind is None:
        raise ValueError("not a TensorBoard event file, MLflow file store entry or W&B run file")
    return LOG_FORMATS[kind][2](path)


def plan_log(path: Path) -> _Content:
    """The values of a logging tool's file, or the plain-file fallback with the reason."""
    kind = log_format_of(path)
    if kind is None:
        return _opaque(None)
    what, reader, read = LOG_FORMATS[kind]
    try:
        values = read(path)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        note = f"values not read: not a readable {what} ({limit_reason(exc)}); compared as bytes"
        return _opaque(note, limit_reason(exc) if over_limit(exc) else None)
    return _Content(format=kind, metadata=_metadata_digests(values), reader=reader, values_only=True)
