"""Structured text outputs (JSON, JSON Lines, YAML, CSV) read as named values, not as bytes.

Trainers write their state and metrics as text (Hugging Face's ``trainer_state.json``, Lightning's
``hparams.yaml`` and ``metrics.csv``). Hashed as bytes, one wall-clock figure makes the whole file
"differ" and hides whether any metric did; read as values, each one is named, compared and, when it is
only run-specific (a duration, a timestamp), listed as such.

Values are named as the hashing contract names them (``flatten``: ``log_history.3.train_runtime``);
JSON Lines and CSV files are a list of rows (``0.loss``, ``12.val_acc``; CSV cells stay strings, as
written). Their content hash is the digest of their values: these files hold no tensors. Files larger
than ``MAX_TEXT_BYTES`` or that do not parse are hashed as plain files, with a note saying why.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from reprobox.guest.hashing._arrays import _Content, _opaque
from reprobox.guest.hashing._bounds import MAX_NESTING, OverLimit, limit_reason, over_limit
from reprobox.guest.hashing._canonical import _metadata_digests, flatten
from reprobox.records.files import JsonTooDeep, loads_bounded

MAX_TEXT_BYTES = 64 << 20
"""Larger text outputs are logs rather than state: hashed as bytes, never parsed into memory."""

TEXT_FORMATS = {".json": "json", ".jsonl": "jsonl", ".yaml": "yaml", ".yml": "yaml", ".csv": "csv"}


def text_format_of(path: Path) -> str | None:
    """The structured text format a file is read as, from its suffix, or None."""
    return TEXT_FORMATS.get(path.suffix.lower())


def read_values(path: Path) -> list[tuple[str, object]]:
    """The file's values as (dotted name, plain value) pairs; ValueError says why it cannot be read."""
    kind = text_format_of(path)
    if kind is None:
        raise ValueError("not a JSON, JSON Lines, YAML or CSV file")
    size = path.stat().st_size
    if size > MAX_TEXT_BYTES:
        raise ValueError(f"{size} bytes, more than the {MAX_TEXT_BYTES >> 20} MiB read as values")
    text = path.read_bytes().decode("utf-8")
    document = _parse(kind, text, path)
    arrays, values = flatten(document)
    if arrays:  # plain parsers never build arrays; a guard, not a case
        raise ValueError("holds arrays")
    return values


def _parse(kind: str, text: str, path: Path) -> object:
    if kind == "json":
        return _json(text)
    if kind == "jsonl":
        return [_json(line) for line in text.splitlines() if line.strip()]
    if kind == "yaml":
        from reprobox.errors import SpecError
        from reprobox.yamlsource import parse_yaml

        try:  # the job files' safe, bounded loader: aliases, nesting and expansion are capped there
            return parse_yaml(text, path, max_bytes=MAX_TEXT_BYTES).data
        except SpecError as exc:
            message = exc.problems[0].message
            raise (OverLimit if "; refused" in message else ValueError)(message) from None
    try:
        rows = list(csv.DictReader(io.StringIO(text)))
    except csv.Error as exc:  # a field over csv's own limit, or a malformed quote
        raise (OverLimit if "limit" in str(exc) else ValueError)(f"not valid CSV ({exc})") from None
    return [dict(row) for row in rows]


def _json(text: str) -> object:
    """One JSON document, its nesting bounded as in every reader (``_bounds.MAX_NESTING``)."""
    try:
        return loads_bounded(text, max_depth=MAX_NESTING)
    except JsonTooDeep:
        raise OverLimit(f"it nests deeper than the limit of {MAX_NESTING} levels") from None


def plan_text(path: Path) -> _Content:
    """The values of a structured text file, or the plain-file fallback with the reason."""
    kind = text_format_of(path) or "text"
    try:
        values = read_values(path)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        note = f"values not read: not a readable {kind} file ({limit_reason(exc)}); compared as bytes"
        return _opaque(note, limit_reason(exc) if over_limit(exc) else None)
    except ImportError:
        return _opaque(f"values not read: the {kind} parser is not installed here; compared as bytes")
    return _Content(format=kind, metadata=_metadata_digests(values), reader=f"{kind} parser")
