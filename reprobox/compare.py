"""Two run records -> a verdict, with the checkpoints and tensors that differ and by how much.

Hashes decide the verdict; tensor-level numbers (which need torch and both runs' files) explain it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from reprobox import codetree, explain, trails
from reprobox.manifest import STATUS_CANCELLED, RunRecord

IDENTICAL = "identical"
DIFFERENT = "different"
FAILED = "failed"
TENSOR_DETAIL_LIMIT = 20
EXPLAINED_FIELDS_LIMIT = 30


@dataclass
class Comparison:
    """The answer to "are these runs the same?", shaped like the CLI's --json output."""

    verdict: str
    runs: list[str]
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    differences: list[dict[str, Any]] = field(default_factory=list)
    differing_tensor_total: int = 0
    notes: list[str] = field(default_factory=list)
    first_divergence: dict[str, Any] | None = None
    explanation: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "verdict": self.verdict,
            "runs": self.runs,
            "checkpoints": self.checkpoints,
            "differences": self.differences,
            "differing_tensors": self.differing_tensor_total,
            "notes": self.notes,
        }
        if self.first_divergence is not None:
            data["first_divergence"] = self.first_divergence
        if self.explanation is not None:
            data["explanation"] = self.explanation
        return data


def compare_runs(records: Sequence[RunRecord], *, tensor_details: bool = True) -> Comparison:
    """Compare every run against the first; the verdict is `identical` only if all match it."""
    runs = [str(r.run_dir) for r in records]
    failed = [r for r in records if not r.succeeded and r.status != STATUS_CANCELLED]
    if failed:
        notes = [f"run {r.run_dir} {r.status}: {r.failure or 'no reason recorded'}" for r in failed]
        return Comparison(FAILED, runs, notes=notes, checkpoints=checkpoint_table(records))
    comparison = Comparison(IDENTICAL, runs, checkpoints=checkpoint_table(records))
    if any(_judged_by_trail(r) for r in records):
        _compare_trails(records, comparison)
        return comparison
    reference = records[0]
    if not reference.checkpoints:
        comparison.verdict = FAILED
        comparison.notes.append(
            "the job wrote no checkpoints matching its 'checkpoints' patterns, so there is nothing "
            "to compare; "
            "write them to $REPROBOX_OUTPUT_DIR"
        )
        return comparison
    for other in records[1:]:
        before = comparison.verdict
        _compare_pair(reference, other, comparison, tensor_details)
        if before == IDENTICAL and comparison.verdict == DIFFERENT:
            comparison.first_divergence = _trail_divergence(reference, other)
            comparison.explanation = explain_difference(reference, other, closeness(comparison))
    return comparison


def closeness(comparison: Comparison) -> str | None:
    """ "max abs difference X over Y tensors", from the tensor statistics, for the stack sentence."""
    values = [d["max_abs"] for d in comparison.differences if d.get("max_abs") is not None]
    if not values:
        return None
    return f"max abs difference {max(values):.3g} over {comparison.differing_tensor_total} tensors"


def explain_difference(a: RunRecord, b: RunRecord, closeness_text: str | None) -> dict[str, Any]:
    """Why two runs differ: different inputs (seed, code, job settings), a different stack (so bitwise
    equality was never expected), or neither (a real nondeterminism)."""
    diffs = explain.diff_fingerprints(a.fingerprint, b.fingerprint)
    numerics = [d for d in diffs if d.affects_numerics]
    inputs = input_differences(a, b)
    sentence = explain.stack_verdict(diffs, closeness=closeness_text)
    if inputs:
        suffix = f" ({closeness_text})" if closeness_text else ""
        sentence = f"different inputs: {'; '.join(inputs)}; the runs were not expected to match{suffix}"
    return {
        "same_stack": not numerics,
        "same_inputs": not inputs,
        "inputs": inputs,
        "sentence": sentence,
        "fields": [
            {"field": d.field, "label": d.label, "a": d.a, "b": d.b, "affects_numerics": d.affects_numerics}
            for d in diffs[:EXPLAINED_FIELDS_LIMIT]
        ],
    }


def input_differences(a: RunRecord, b: RunRecord) -> list[str]:
    """What the user changed between the runs, as short phrases: seed, code, job settings, image."""
    found = []
    if a.data.get("seed") != b.data.get("seed"):
        found.append(f"seed {a.data.get('seed')} vs {b.data.get('seed')}")
    code_a, code_b = a.data.get("code") or {}, b.data.get("code") or {}
    if code_a.get("sha256") != code_b.get("sha256"):
        changes = codetree.changed_files(code_a.get("files") or {}, code_b.get("files") or {})
        named = [*changes["changed"], *changes["added"], *changes["removed"]]
        found.append(
            "code "
            + (", ".join(named[:5]) if named else "tree")
            + (" differ" if len(named) != 1 else " differs")
        )
    # Determinism flags and thread counts are left to the fingerprint: they are part of the stack.
    for key in ("env", "command", "launcher"):
        if (a.data.get("job") or {}).get(key) != (b.data.get("job") or {}).get(key):
            found.append(f"job {key}")
    image_a = ((a.data.get("runtime") or {}).get("image") or {}).get("id")
    image_b = ((b.data.get("runtime") or {}).get("image") or {}).get("id")
    if image_a != image_b:
        found.append("image" if image_a and image_b else "runtime (container vs local)")
    return found


def _judged_by_trail(record: RunRecord) -> bool:
    """Prefix checks and runs stopped at a divergence have no final checkpoints: their trails decide."""
    return (
        bool(record.data.get("prefix_check") or record.data.get("stopped_early"))
        or record.status == STATUS_CANCELLED
    )


def _compare_trails(records: Sequence[RunRecord], out: Comparison) -> None:
    reference = trails.trail_of(records[0])
    if reference is None:
        out.verdict = FAILED
        out.notes.append("the runs stopped early but the reference has no trail to compare")
        return
    for other in records[1:]:
        trail = trails.trail_of(other)
        if trail is None:
            out.verdict = FAILED
            out.notes.append(f"run {other.run_dir} has no trail to compare")
            continue
        divergence = trails.first_divergence(reference, trail)
        if divergence is not None:
            if out.first_divergence is None:
                out.first_divergence = divergence
                out.explanation = explain_difference(records[0], other, None)
            out.verdict = DIFFERENT
            continue
        same, _last = trails.common_prefix_identical(reference, trail)
        if not same and out.verdict == IDENTICAL:
            out.verdict = FAILED
            out.notes.append(f"run {other.run_dir} recorded no optimizer step in common with the reference")
    prefix = records[0].data.get("prefix_check")
    if prefix and out.verdict == IDENTICAL:
        out.notes.append(f"prefix check: the first {prefix['max_steps']} optimizer steps are bit-identical")


def _trail_divergence(a: RunRecord, b: RunRecord) -> dict[str, Any] | None:
    ta, tb = trails.trail_of(a), trails.trail_of(b)
    if ta is None or tb is None:
        return None
    return trails.first_divergence(ta, tb)


def checkpoint_table(records: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """Per checkpoint file: its file sha256 and content hash in each run (None where it is missing)."""
    paths = sorted({c["path"] for r in records for c in r.checkpoints})
    table = []
    for path in paths:
        per_run = []
        for record in records:
            entry = record.checkpoint(path)
            per_run.append(
                {
                    "run": str(record.run_dir),
                    "file_sha256": entry.get("file_sha256") if entry else None,
                    "content_sha256": entry.get("content_sha256") if entry else None,
                }
            )
        contents = {item["content_sha256"] for item in per_run}
        table.append(
            {"path": path, "identical": len(contents) == 1 and None not in contents, "runs": per_run}
        )
    return table


def _compare_pair(a: RunRecord, b: RunRecord, out: Comparison, tensor_details: bool) -> None:
    a_paths = {c["path"] for c in a.checkpoints}
    b_paths = {c["path"] for c in b.checkpoints}
    for path in sorted(a_paths ^ b_paths):
        out.verdict = DIFFERENT
        where = a.run_dir if path in a_paths else b.run_dir
        out.notes.append(f"checkpoint {path} exists only in {where}")
    for path in sorted(a_paths & b_paths):
        ca, cb = a.checkpoint(path) or {}, b.checkpoint(path) or {}
        _note_metadata(path, ca, cb, out)
        if ca.get("content_sha256") == cb.get("content_sha256"):
            if ca.get("file_sha256") != cb.get("file_sha256"):
                out.notes.append(
                    f"checkpoint {path}: same tensors, different file bytes (container format only)"
                )
            continue
        out.verdict = DIFFERENT
        names = differing_tensor_names(ca, cb)
        out.differing_tensor_total += len(names)
        shown = names[: max(0, TENSOR_DETAIL_LIMIT - len(out.differences))]
        out.differences.extend(
            _tensor_differences(a, b, path, shown, tensor_details=tensor_details, notes=out.notes)
        )
        if len(names) > len(shown):
            out.notes.append(
                f"checkpoint {path}: {len(names)} tensors differ; the first {len(shown)} are listed"
            )


def differing_tensor_names(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Tensor names whose digest, dtype or shape differ, or that exist on one side only, in name order."""
    ta = {t["name"]: t for t in a.get("tensors", [])}
    tb = {t["name"]: t for t in b.get("tensors", [])}
    if not ta and not tb:
        return ["<file>"]
    return sorted(name for name in set(ta) | set(tb) if ta.get(name) != tb.get(name))


def _note_metadata(path: str, a: dict[str, Any], b: dict[str, Any], out: Comparison) -> None:
    ma, mb = a.get("metadata") or {}, b.get("metadata") or {}
    keys = sorted(k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k))
    if keys:
        shown = ", ".join(keys[:10]) + (f" and {len(keys) - 10} more" if len(keys) > 10 else "")
        out.notes.append(
            f"checkpoint {path}: non-tensor entries differ ({shown}); they are not part of the weights"
        )


def _tensor_differences(
    a: RunRecord, b: RunRecord, path: str, names: list[str], *, tensor_details: bool, notes: list[str]
) -> list[dict[str, Any]]:
    plain = [{"checkpoint": path, "name": name} for name in names]
    if not names or not tensor_details or names == ["<file>"]:
        return plain
    file_a, file_b = a.output_dir / path, b.output_dir / path
    if not (file_a.exists() and file_b.exists()):
        notes.append(f"checkpoint {path}: files not present in both run dirs; tensor statistics skipped")
        return plain
    from reprobox import tensordiff

    try:
        diffs = tensordiff.diff_checkpoint_files(file_a, file_b, checkpoint=path, names=names)
    except ImportError:
        notes.append("install torch to see how much the differing tensors differ")
        return plain
    except Exception as exc:  # noqa: BLE001 - statistics explain; the verdict stands without them
        notes.append(f"checkpoint {path}: tensor statistics unavailable ({type(exc).__name__}: {exc})")
        return plain
    return [d.to_json() for d in diffs]
