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
import json
from pathlib import Path

from reprobox.guest.hashing._arrays import _Content, _opaque
from reprobox.guest.hashing._canonical import _metadata_digests, flatten

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
        return json.loads(text)
    if kind == "jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if kind == "yaml":
        from reprobox.errors import SpecError
        from reprobox.yamlsource import parse_yaml

        try:  # the job files' safe, bounded loader: aliases, nesting and expansion are capped there
            return parse_yaml(text, path, max_bytes=MAX_TEXT_BYTES).data
        except SpecError as exc:
            raise ValueError(exc.problems[0].message) from None
    rows = list(csv.DictReader(io.StringIO(text)))
    return [dict(row) for row in rows]


def plan_text(path: Path) -> _Content:
    """The values of a structured text file, or the plain-file fallback with the reason."""
    kind = text_format_of(path) or "text"
    try:
        values = read_values(path)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return _opaque(f"values not read: not a readable {kind} file ({_short(exc)}); compared as bytes")
    except ImportError:
        return _opaque(f"values not read: the {kind} parser is not installed here; compared as bytes")
    return _Content(format=kind, metadata=_metadata_digests(values), reader=f"{kind} parser")


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
