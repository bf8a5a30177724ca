"""What an attestation keeps of a variation matrix, and which runs it vouches for.

The baseline runs twice with every varied factor at its baseline value. When those two runs are
bit-identical they are attested like the runs of a plain `verify`, and the matrix goes into the
predicate's `variation` field whatever it found: a sensitive factor tells a reviewer what to keep
equal, it does not make the baseline's result less reproducible. A baseline that differs from itself
is never attested (nothing about it is reproducible), and neither is a varied run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprobox.attest import build_attestation
from reprobox.errors import UsageError
from reprobox.fileio import json_number
from reprobox.forensics.variation.matrix import UNSUPPORTED, FactorResult, VariationResult
from reprobox.records.attestation import VARIATION_NOT_APPLICABLE
from reprobox.records.manifest import read_record


def attestable(result: VariationResult) -> bool:
    """Whether the baseline's runs may be attested: both finished and are bit-identical."""
    return result.baseline_reproducible


def variation_statement(result: VariationResult) -> dict[str, Any]:
    """The in-toto Statement for the baseline's runs, with the matrix in `predicate.variation`.

    Raises UsageError when the baseline cannot be attested (see `attestable`, `build_attestation`).
    """
    if not attestable(result):
        raise UsageError(
            f"the baseline is not reproducible by itself ({result.baseline.sentence}); "
            "only bit-identical runs can be attested"
        )
    records = [read_record(Path(run)) for run in result.baseline_runs]
    return build_attestation(records, extra={"variation": variation_entry(result)})


def variation_entry(result: VariationResult) -> dict[str, Any]:
    """The matrix as the attestation keeps it: per factor its status, pair of values and what changed."""
    rows = [_row(row) for row in result.rows]
    return {
        "runtime": result.runtime,
        "factors": rows,
        "invariant": [row["factor"] for row in rows if row["status"] == "invariant"],
        "sensitive": [row["factor"] for row in rows if row["status"] == "sensitive"],
        "combination": list(result.combination) if result.combination is not None else None,
    }


def _row(row: FactorResult) -> dict[str, Any]:
    status = VARIATION_NOT_APPLICABLE if row.status == UNSUPPORTED and not row.applicable else row.status
    entry: dict[str, Any] = {
        "factor": row.factor,
        "status": status,
        "values": row.values,
        "baseline": row.baseline,
        "varied": row.varied,
        "reason": row.reason,
        "pin": row.pin,
    }
    if row.files or row.tensors or row.values_changed:
        entry["files"] = row.files
        entry["tensors"] = row.tensors
        entry["values_changed"] = row.values_changed
        entry["only_in_baseline"] = row.only_baseline
        entry["only_in_varied"] = row.only_varied
        entry["max_abs"] = json_number(row.max_abs)
        entry["first_diverging_step"] = row.first_step
    return entry
