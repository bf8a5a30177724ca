"""A claimed number read from what a finished run left: an output file or the job's log.

The files are the job's, so they are read as untrusted: below the outputs folder only, no link on
the way, bounded in size, parsed with the safe readers (JSON bounded in depth, YAML with the job-file
loader's limits, CSV with the standard reader). A missing file or key, or a value that is not a number,
is an error naming the claim: the job did not produce what its job file promised.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobox import saferead
from reprobox.claims._check import as_number
from reprobox.errors import SpecError
from reprobox.fileio import loads_bounded
from reprobox.guest.filehash import file_sha256
from reprobox.jobfile import Claim
from reprobox.jobfile._claims import STDOUT, is_checkpoint_source, is_text_source
from reprobox.yamlsource import parse_yaml

MAX_CLAIM_FILE_BYTES = 64 << 20  # a metrics file; a larger one is not read whole
MAX_LOG_TAIL_BYTES = 16 << 20  # the end of the job's log, where final numbers are printed
MAX_EVIDENCE_CHARS = 200
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class ClaimValue:
    """One claim as a run produced it: the number, the file it came from (with its digest) and the
    text it was read from; or why it could not be read."""

    name: str
    file: str
    key: str
    value: float | None
    sha256: str | None = None  # of the file read (for stdout: of the log's tail that was searched)
    evidence: str | None = None  # the matched text or the raw value, bounded
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        value = self.value if self.value is None or math.isfinite(self.value) else repr(self.value)
        return {
            "name": self.name,
            "value": value,
            "file": self.file,
            "key": self.key,
            "sha256": self.sha256,
            "evidence": self.evidence,
            "error": self.error,
        }


def extract_claims(claims: tuple[Claim, ...], output_dir: Path, log: Path) -> list[ClaimValue]:
    """Every claim's value from a finished run's outputs folder and log."""
    return [extract_claim(claim, output_dir, log) for claim in claims]


def extract_claim(claim: Claim, output_dir: Path, log: Path) -> ClaimValue:
    if is_checkpoint_source(claim.file):
        return _from_checkpoint(claim, output_dir)
    try:
        raw, where = _read_source(claim, output_dir, log)
    except (OSError, saferead.UnsafeFile, _Ambiguous) as exc:
        return _failed(claim, _unreadable(claim, exc))
    digest = hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _failed(claim, f"{where} is not UTF-8 text", digest)
    try:
        found = _find(claim, text)
    except _NotFound as exc:
        return _failed(claim, f"{where} {exc}", digest)
    return _valued(claim, where, found, digest)


def _from_checkpoint(claim: Claim, output_dir: Path) -> ClaimValue:
    """A value saved inside a checkpoint (`{"state_dict": ..., "metric": 0.97}`), read with hashing's safe
    readers: named as hashing names it, a plain number or a one-element tensor."""
    from reprobox.guest.hashing import load_tensors
    from reprobox.outputvalues import output_file

    try:
        relative = _resolve(claim.file, output_dir)
    except (FileNotFoundError, _Ambiguous) as exc:
        return _failed(claim, _unreadable(claim, exc))
    path = output_file(output_dir, relative)
    if path is None:
        missing = not (output_dir / relative).exists() and not (output_dir / relative).is_symlink()
        reason = "was not written" if missing else "cannot be read (not a regular file below the outputs)"
        return _failed(claim, f"{relative} {reason}")
    try:
        digest = file_sha256(path)
        tensors, values = load_tensors(path)
        tensor = tensors[claim.key] if claim.key not in values and claim.key in tensors else None
    except Exception as exc:  # noqa: BLE001 - any refusal of the safe readers is the claim's error
        reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        reason = reason.splitlines()[0] if reason else type(exc).__name__
        return _failed(claim, f"{relative} cannot be read safely ({reason})")
    if claim.key in values:
        found: Any = values[claim.key]
    elif tensor is not None and tensor.numel() == 1:
        found = tensor.reshape(()).item()
    else:
        return _failed(claim, f"{relative} holds no value named {claim.key!r}", digest)
    return _valued(claim, relative, found, digest)


def _valued(claim: Claim, where: str, found: Any, digest: str) -> ClaimValue:
    """The claim with the number found at its key, or its error when that is no finite number."""
    number = as_number(found)
    evidence = str(found)[:MAX_EVIDENCE_CHARS]
    if number is None:
        return _failed(claim, f"{where} holds {evidence!r} at {claim.key!r}, not a finite number", digest)
    return ClaimValue(claim.name, claim.file, claim.key, number, digest, evidence)


class _NotFound(Exception):
    pass


class _Ambiguous(Exception):
    pass


def _read_source(claim: Claim, output_dir: Path, log: Path) -> tuple[bytes, str]:
    if claim.file == STDOUT:
        return saferead.read_tail(log, MAX_LOG_TAIL_BYTES, root=log.parent), "the job's log"
    relative = _resolve(claim.file, output_dir)
    path = output_dir.joinpath(*Path(relative).parts)
    return saferead.read_bytes(path, MAX_CLAIM_FILE_BYTES, root=output_dir), relative


def _resolve(file: str, output_dir: Path) -> str:
    """The claim's file below the outputs: as written, or the one file its pattern names."""
    return _one_match(file, output_dir) if _GLOB.search(file) else file


def _one_match(pattern: str, output_dir: Path) -> str:
    """The one file a pattern names (`logs/version_*/metrics.csv`); none or several is an error."""
    found = sorted(p.relative_to(output_dir).as_posix() for p in output_dir.glob(pattern))
    if not found:
        raise FileNotFoundError(pattern)
    if len(found) > 1:
        shown = ", ".join(found[:4]) + (", ..." if len(found) > 4 else "")
        raise _Ambiguous(f"matches {len(found)} files ({shown}); make the pattern name one")
    return found[0]


def _find(claim: Claim, text: str) -> Any:
    suffix = claim.file.lower().rsplit(".", 1)[-1]
    if is_text_source(claim.file):
        return _last_match(claim.key, text)
    if suffix == "json":
        return _at_path(_json(text), claim.key)
    if suffix == "jsonl":
        return _last_line_holding(claim.key, text)
    if suffix in ("yaml", "yml"):
        try:
            data = parse_yaml(text, Path(claim.file)).data
        except SpecError as exc:
            raise _NotFound(f"is not YAML the safe loader reads ({exc.problems[0].message})") from None
        return _at_path(data, claim.key)
    return _last_row_value(claim.key, text, "\t" if suffix == "tsv" else ",")


def _last_match(pattern: str, text: str) -> str:
    matches = re.findall(pattern, text, flags=re.MULTILINE)
    if not matches:
        raise _NotFound(f"has no line matching {pattern!r}")
    return str(matches[-1])


def _json(text: str) -> Any:
    try:
        return loads_bounded(text)
    except ValueError as exc:  # JsonTooDeep too
        raise _NotFound(f"is not valid JSON ({exc})") from None


def _at_path(data: Any, key: str) -> Any:
    """`a.b.0.c`: mapping keys and list indices (negative from the end); a whole key with dots wins."""
    if isinstance(data, dict) and key in data:
        return data[key]
    node = data
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and _index_in(part, len(node)):
            node = node[int(part)]
        else:
            missing = f" (no {part!r} there)" if part != key else ""
            raise _NotFound(f"has no key {key!r}{missing}")
    return node


def _index_in(part: str, length: int) -> bool:
    return re.fullmatch(r"-?[0-9]{1,18}", part) is not None and -length <= int(part) < length


def _last_line_holding(key: str, text: str) -> Any:
    """JSON lines (one record per line, as loggers append them): the last line that has the key."""
    for line in reversed(text.splitlines()):
        if not line.strip():
            continue
        try:
            return _at_path(loads_bounded(line), key)
        except (ValueError, _NotFound):
            continue
    raise _NotFound(f"has no line with key {key!r}")


def _last_row_value(column: str, text: str, delimiter: str) -> str:
    """A CSV column's value in the last row that fills it (loggers leave it blank on other rows)."""
    import csv  # only for a claim read from a table

    reader = csv.DictReader(io.StringIO(text), delimiter=delimiter)
    if reader.fieldnames is None or column not in reader.fieldnames:
        header = ", ".join(reader.fieldnames or []) or "none"
        raise _NotFound(f"has no column {column!r} (columns: {header})")
    value = None
    for row in reader:
        cell = row.get(column)
        if cell is not None and cell.strip():
            value = cell.strip()
    if value is None:
        raise _NotFound(f"has no row with a value in column {column!r}")
    return value


def _failed(claim: Claim, error: str, digest: str | None = None) -> ClaimValue:
    return ClaimValue(claim.name, claim.file, claim.key, None, digest, None, f"claim {claim.name}: {error}")


def _source_name(claim: Claim) -> str:
    return "the job's log" if claim.file == STDOUT else claim.file


def _unreadable(claim: Claim, exc: Exception) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"{_source_name(claim)} was not written"
    if isinstance(exc, _Ambiguous):
        return f"{claim.file} {exc}"
    reason = (exc.strerror or type(exc).__name__) if isinstance(exc, OSError) else str(exc)
    return f"{_source_name(claim)} cannot be read ({reason})"
