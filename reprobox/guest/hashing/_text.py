"""Structured text outputs (JSON, JSON Lines, YAML, CSV and TSV) read as named values, not as bytes.

Trainers write their state and metrics as text (Hugging Face's ``trainer_state.json``, Lightning's
``hparams.yaml`` and ``metrics.csv``). Hashed as bytes, one wall-clock figure makes the whole file
"differ" and hides whether any metric did; read as values, each one is named, compared and, when it is
only run-specific (a duration, a timestamp), listed as such.

Values are named as the hashing contract names them (``flatten``: ``log_history.3.train_runtime``);
JSON Lines, CSV and TSV files are a list of rows (``0.loss``, ``12.val_acc``; their cells stay strings, as
written; a CSV's leading ``#`` lines are its preamble, not its header: ``preamble.0.t_start``). Their
content hash is the digest of their values: these files hold no tensors. A ``.json`` file whose text
goes on after its first document is read as JSON Lines when each of its lines is one JSON value (loggers
append a record a line under a ``.json`` name). Files larger than
``MAX_TEXT_BYTES`` or that do not parse are hashed as plain files, with a note saying why. A file with
no suffix that holds a JSON object (an archive member named ``data``) is read as JSON.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from reprobox.guest.hashing import _sniff
from reprobox.guest.hashing._arrays import _Content, _opaque
from reprobox.guest.hashing._bounds import MAX_NESTING, OverLimit, limit_reason, over_limit
from reprobox.guest.hashing._canonical import _metadata_digests, flatten, flatten_rows, numpy_dtype_name
from reprobox.guest.hashing._loaded import loaded
from reprobox.guest.hashing._sniff import TEXT_FORMATS
from reprobox.guest.hashing._textbounds import (
    MAX_TEXT_VALUES,
    EntryCount,
    counted_lines,
    decoded,
    file_count,
    json_entries,
    line_entries,
    lines_of,
)

MAX_TEXT_BYTES = 64 << 20
"""Larger text outputs are logs rather than state: hashed as bytes, never parsed into memory."""

MAX_YAML_TEXT_BYTES = 1 << 20
"""YAML is read by PyYAML's pure-Python safe loader, which scans well under 1 MiB of text a second of
CPU (one long scalar as slowly as many short values): a larger YAML output (genuine ones, such as
``hparams.yaml``, are a few KiB, as job files are) is compared as bytes, within the CPU time every file
is read in."""

BOUNDS = (
    f"at most {MAX_TEXT_BYTES >> 20} MiB; nesting as every reader; {MAX_TEXT_VALUES:,} entries, counted as "
    f"they are read; YAML at most {MAX_YAML_TEXT_BYTES >> 20} MiB"
)

DELIMITERS = {"csv": ",", "tsv": "\t"}
"""The cell delimiter of each table format; both are read by the same CSV reader."""

SERIALIZED_KEY = ":serialized:"
MAX_LISTED_ELEMENTS = 4096
"""An array inside an embedded pickle is its elements up to this many, else the sha256 of its bytes."""
_PICKLE_BASE64_HEAD = "gA"  # base64 of a pickle's PROTO opcode (0x80), protocol 2 and later

COMMENT_PREFIX = "#"
_MORE_AFTER_THE_DOCUMENT = "Extra data"
"""``json.loads``' message for a text that goes on after its first document: a ``.json`` file of JSON
Lines (bayesian-optimization's ``JSONLogger`` appends one object a step to ``logs.json``)."""
PREAMBLE = "preamble"


def text_format_of(path: Path) -> str | None:
    """The structured text format a file is read as, from its suffix (``_sniff.TEXT_FORMATS``), or None."""
    return TEXT_FORMATS.get(path.suffix.lower())


def read_values(path: Path) -> list[tuple[str, object]]:
    """The file's values as (dotted name, plain value) pairs; ValueError says why it cannot be read.

    Their entries are counted as they are read (``_textbounds``): CSV and JSON Lines line by line, one
    JSON document from its text before it is parsed, YAML node by node; past the value limit the file
    is refused before its values fill memory.
    """
    kind = text_format_of(path)
    if kind is None:
        raise ValueError("not a JSON, JSON Lines, YAML, CSV or TSV file")
    if kind in DELIMITERS:
        return _csv_values(path, DELIMITERS[kind])
    if kind == "jsonl":
        return _jsonl_values(path)
    if kind == "json":
        try:
            return _flat(_json_document(path))
        except json.JSONDecodeError as exc:
            if exc.msg != _MORE_AFTER_THE_DOCUMENT:
                raise
        return _jsonl_values(path)  # refused in turn unless every line is one JSON value
    return _flat(_yaml(decoded(_read_bytes(path, MAX_YAML_TEXT_BYTES)), path))


def _check_size(size: int, limit: int = MAX_TEXT_BYTES) -> None:
    if size > limit:
        raise ValueError(f"{size} bytes, more than the {limit >> 20} MiB read as values")


def _read_bytes(path: Path, limit: int = MAX_TEXT_BYTES) -> bytes:
    _check_size(path.stat().st_size, limit)
    with path.open("rb") as handle:
        raw = handle.read(limit + 1)  # a file that grew since: refused all the same
    _check_size(len(raw), limit)
    return raw


def _open_lines(path: Path) -> BinaryIO:
    _check_size(path.stat().st_size)
    return path.open("rb")


def _flat(document: object) -> list[tuple[str, object]]:
    arrays, values = flatten(document)
    if arrays:  # plain parsers never build arrays; a guard, not a case
        raise ValueError("holds arrays")
    return values


def _json_document(path: Path) -> object:
    """One JSON document, refused before parsing when its text holds more entries than the limit."""
    raw = _read_bytes(path)
    file_count().add(json_entries(raw))
    text = decoded(raw)
    del raw  # the text alone is held while it is parsed, and the document alone once it is
    document = _loads(text)
    del text
    return _embedded(document, 0)


def _jsonl_values(path: Path) -> list[tuple[str, object]]:
    """A JSON Lines file's values, its lines read, counted and parsed one at a time."""
    count = file_count()

    def documents(handle: BinaryIO) -> Iterator[object]:
        for line in lines_of(handle):
            for piece in line.splitlines():  # the lines ``str.splitlines`` makes of the whole text
                if piece.strip():
                    count.add(line_entries(piece))
                    yield _json(piece)

    with _open_lines(path) as handle:
        return flatten_rows(documents(handle))


def _yaml(text: str, path: Path) -> object:
    from reprobox.errors import SpecError
    from reprobox.yamlsource import parse_yaml

    try:  # the job files' safe, bounded loader: nodes, aliases, nesting and expansion are capped there
        return parse_yaml(text, path, max_bytes=MAX_YAML_TEXT_BYTES).data
    except SpecError as exc:
        message = exc.problems[0].message
        raise (OverLimit if "; refused" in message else ValueError)(message) from None


def _arrays_as_values(value: object, depth: int) -> object:
    """An unpickled value with its NumPy arrays as values (a values file holds no tensors): dtype, shape
    and the elements, or their sha256 past ``MAX_LISTED_ELEMENTS``."""
    if depth > MAX_NESTING:
        raise OverLimit(f"it nests deeper than the limit of {MAX_NESTING} levels")
    if isinstance(value, dict):
        return {k: _arrays_as_values(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_arrays_as_values(v, depth + 1) for v in value]
    numpy = loaded("numpy")
    if numpy is None or not isinstance(value, numpy.ndarray):
        return value
    described: dict[str, object] = {"dtype": numpy_dtype_name(value.dtype), "shape": list(value.shape)}
    if value.size <= MAX_LISTED_ELEMENTS and value.dtype.kind in "biuf":
        described["values"] = value.tolist()
    else:
        little = numpy.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<"))
        described["sha256"] = hashlib.sha256(little.view(numpy.uint8)).hexdigest()
    return described


def _csv_values(path: Path, delimiter: str = ",") -> list[tuple[str, object]]:
    """A CSV's rows (``<row>.<column>``), after its leading comment lines, which are not its header; a
    TSV's likewise, its cells split at tabs.

    Writers put a preamble before the header (Stable-Baselines3's ``monitor.csv`` starts
    ``#{"t_start": ..., "env_id": ...}``): each such line is ``preamble.<n>``, its JSON object's fields
    named inside it (``preamble.0.t_start``), other text as the line less its ``#``. Rows are read one
    at a time, each line's cells counted before it is parsed.
    """
    count = file_count()
    with _open_lines(path) as handle:
        lines = lines_of(handle)
        preamble, first = _preamble(lines, count)
        rows = csv.DictReader(
            counted_lines(itertools.chain(first, lines), count, delimiter), delimiter=delimiter
        )
        try:
            values = flatten_rows(rows)
        except csv.Error as exc:  # a field over csv's own limit, or a malformed quote
            raise (OverLimit if "limit" in str(exc) else ValueError)(f"not valid CSV ({exc})") from None
    if preamble:
        values += _flat({PREAMBLE: preamble})
    return values


def _preamble(lines: Iterator[str], count: EntryCount) -> tuple[list[object], list[str]]:
    """The leading ``#`` lines, as ``str.splitlines`` splits the whole text, and the rest of the line
    that ends them (the CSV's first)."""
    preamble: list[object] = []
    for line in lines:
        pieces = line.splitlines(keepends=True)
        while pieces and pieces[0].startswith(COMMENT_PREFIX):
            count.add(line_entries(pieces[0]))
            preamble.append(_comment(pieces.pop(0)))
        if pieces:
            return preamble, ["".join(pieces)]
    return preamble, []


def _comment(line: str) -> object:
    body = line.removeprefix(COMMENT_PREFIX).strip()
    if body.startswith("{"):
        try:
            document = _json(body)
        except ValueError as exc:
            if isinstance(exc, OverLimit):
                raise
        else:
            if isinstance(document, dict):
                return document
    return body


def is_bare_json(path: Path) -> bool:
    """A file without a suffix that holds a JSON object (Stable-Baselines3's ``data`` member): judged
    from its first non-blank byte, within the size read as values."""
    if path.suffix or path.stat().st_size > MAX_TEXT_BYTES:
        return False
    return _sniff.head(path).lstrip().startswith(b"{")


def read_bare_json(path: Path) -> list[tuple[str, object]]:
    """A suffix-less JSON document's values, named as a ``.json`` file's are."""
    return _flat(_json_document(path))


def plan_bare_json(path: Path) -> _Content:
    """The values of a suffix-less JSON document, or its bytes with the reason."""
    return _planned("json", read_bare_json, path)


def _json(text: str) -> object:
    """One JSON document, its nesting bounded as in every reader (``_bounds.MAX_NESTING``), with the
    pickles it embeds read as values (``_embedded``)."""
    return _embedded(_loads(text), 0)


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except RecursionError:  # deeper than the parser recurses: far deeper than the limit
        raise OverLimit(_TOO_DEEP) from None


_TOO_DEEP = f"it nests deeper than the limit of {MAX_NESTING} levels"


def _embedded(value: object, depth: int) -> object:
    """The parsed document, its nesting checked and each ``":serialized:"`` pickle in it read, in place,
    by the safe pickle reader.

    Stable-Baselines3 writes what JSON cannot hold (a deque of episode records, a space, a schedule) as
    ``{":type:": ..., ":serialized:": <base64 of a pickle>}``; as text, one wall-clock figure inside makes
    the whole string differ. Read (nothing imported or run), its fields are named inside it
    (``ep_info_buffer.:serialized:.__items__.0.t``); a string that is not such a pickle stays as written.
    A list or object at ``depth`` is at level ``depth + 1``: past ``MAX_NESTING`` levels it is refused.
    """
    if type(value) is list:
        children: Iterable[object] = value
    elif type(value) is dict:
        children = value.values()
    else:
        return value
    if depth >= MAX_NESTING:
        raise OverLimit(_TOO_DEEP)
    for child in children:
        if type(child) is list or type(child) is dict:
            _embedded(child, depth + 1)
    if type(value) is dict:
        encoded = value.get(SERIALIZED_KEY)
        if isinstance(encoded, str) and encoded.startswith(_PICKLE_BASE64_HEAD):
            from reprobox.guest.hashing._pickle import read_pickle_bytes  # only for a pickle written as text

            try:  # strict base64, a pickle read to its last byte: no other spelling gives the same value
                pickled = base64.b64decode(encoded, validate=True)
                value[SERIALIZED_KEY] = _arrays_as_values(read_pickle_bytes(pickled), 0)
            except ValueError as exc:  # binascii.Error is one
                if isinstance(exc, OverLimit):
                    raise
    return value


def plan_text(path: Path) -> _Content:
    """The values of a structured text file, or the plain-file fallback with the reason."""
    return _planned(text_format_of(path) or "text", read_values, path)


def _planned(kind: str, read: Callable[[Path], list[tuple[str, object]]], path: Path) -> _Content:
    try:
        values = read(path)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        note = f"values not read: not a readable {kind} file ({limit_reason(exc)}); compared as bytes"
        return _opaque(note, limit_reason(exc) if over_limit(exc) else None)
    except ImportError:
        return _opaque(f"values not read: the {kind} parser is not installed here; compared as bytes")
    metadata = _metadata_digests(values)
    return _Content(format=kind, metadata=metadata, reader=f"{kind} parser", values_only=True)
