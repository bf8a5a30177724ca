"""Two run records -> a graded verdict, with every tensor and value that differs, and why.

Grades, one sentence first:

- ``bit-identical``: every compared output file's bytes are equal;
- ``reproduced``: every tensor and every value is equal, except values recognised as run-specific (the
  run's own paths, timestamps, durations, host name: see ``runspecific``) and outputs the job file lists
  under ``compare: {ignore: [...]}``, each listed; also when only a container format's bytes differ;
- ``not reproducible``: any tensor or any other value differs, named with both values.

Hashes find what differs; the values themselves (read from both runs' files at compare time, never
unpickled) say whether it is run-specific and what it was. The JSON ``verdict`` stays ``identical`` /
``different`` / ``failed`` for scripts; ``grade`` and ``sentence`` carry the finer answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from reprobox import codetree, explain, outputvalues, trails
from reprobox.manifest import STATUS_CANCELLED, RunRecord
from reprobox.runspecific import RunContext, classify_value, mask, masked_name, reason_by_key

IDENTICAL = "identical"
DIFFERENT = "different"
FAILED = "failed"
BIT_IDENTICAL = "bit-identical"
REPRODUCED = "reproduced"
NOT_REPRODUCIBLE = "not reproducible"
NO_VERDICT = "no verdict"
TENSOR_DETAIL_LIMIT = 20
VALUE_DETAIL_LIMIT = 50
EXPLAINED_FIELDS_LIMIT = 30
WHOLE_FILE = "<file>"


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
    grade: str = ""
    sentence: str = ""
    value_differences: list[dict[str, Any]] = field(default_factory=list)  # real: name, a, b
    run_specific: list[dict[str, Any]] = field(default_factory=list)  # excused, each with its reason
    ignored: list[dict[str, Any]] = field(default_factory=list)  # left out by the job's compare.ignore
    renamed: list[dict[str, Any]] = field(default_factory=list)  # same content under other file names
    format_only: list[str] = field(default_factory=list)  # same tensors and values, other file bytes

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "verdict": self.verdict,
            "grade": self.grade,
            "sentence": self.sentence,
            "runs": self.runs,
            "checkpoints": self.checkpoints,
            "differences": self.differences,
            "differing_tensors": self.differing_tensor_total,
            "value_differences": self.value_differences,
            "run_specific": self.run_specific,
            "ignored": self.ignored,
            "renamed_files": self.renamed,
            "format_only": self.format_only,
            "notes": self.notes,
        }
        if self.first_divergence is not None:
            data["first_divergence"] = self.first_divergence
        if self.explanation is not None:
            data["explanation"] = self.explanation
        return data


def compare_runs(records: Sequence[RunRecord], *, tensor_details: bool = True) -> Comparison:
    """Compare every run against the first; the verdict is `identical` only if all match it."""
    comparison = _compare(records, tensor_details)
    comparison.grade, comparison.sentence = grade_of(comparison)
    return comparison


def _compare(records: Sequence[RunRecord], tensor_details: bool) -> Comparison:
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


@dataclass(frozen=True)
class _Side:
    """One run of a pair: its record and what names it rather than its results."""

    record: RunRecord
    context: RunContext

    @classmethod
    def of(cls, record: RunRecord) -> _Side:
        return cls(record, RunContext.from_record(str(record.run_dir), record.data))


def _ignore_rules(record: RunRecord) -> list[tuple[str, str | None]]:
    rules = ((record.data.get("job") or {}).get("compare") or {}).get("ignore") or []
    return [(str(r.get("file")), r.get("key")) for r in rules if isinstance(r, dict) and r.get("file")]


def _ignored_by(rules: list[tuple[str, str | None]], path: str, name: str | None) -> str | None:
    """The rule (as written) that leaves this file, or this value in it, out of the verdict."""
    for file_glob, key_glob in rules:
        if not _path_matches(file_glob, path):
            continue
        if key_glob is None:
            return file_glob
        if name is not None and fnmatchcase(name, key_glob):
            return f"{file_glob}: {key_glob}"
    return None


def _path_matches(pattern: str, path: str) -> bool:
    return fnmatchcase(path, pattern) or (
        "/" not in pattern and fnmatchcase(path.rsplit("/", 1)[-1], pattern)
    )


def _compare_pair(a: RunRecord, b: RunRecord, out: Comparison, tensor_details: bool) -> None:
    pair = _Pair(_Side.of(a), _Side.of(b), _ignore_rules(a), out, tensor_details)
    for path_a, path_b in pair.paired_files():
        pair.compare_file(path_a, path_b)


@dataclass
class _Pair:
    """One run against the reference: every difference goes into ``out``, real or excused."""

    a: _Side
    b: _Side
    rules: list[tuple[str, str | None]]
    out: Comparison
    tensor_details: bool

    def paired_files(self) -> list[tuple[str, str]]:
        """Same path, or paths equal once run-specific parts are masked; the rest said plainly:
        same content under another name (a uuid), or present in one run only."""
        a, b, out = self.a, self.b, self.out
        paths_a = {c["path"] for c in a.record.checkpoints}
        paths_b = {c["path"] for c in b.record.checkpoints}
        pairs = [(p, p) for p in sorted(paths_a & paths_b)]
        rest_a, rest_b = sorted(paths_a - paths_b), sorted(paths_b - paths_a)
        masked_b: dict[str, list[str]] = {}
        for path in rest_b:
            masked_b.setdefault(masked_name(path, b.context), []).append(path)
        for path in list(rest_a):
            matches = masked_b.get(masked_name(path, a.context), [])
            if len(matches) == 1:
                other = matches.pop()
                pairs.append((path, other))
                rest_a.remove(path)
                rest_b.remove(other)
                why = " and ".join(sorted(mask(path, a.context)[1] | mask(other, b.context)[1]))
                out.run_specific.append(
                    {
                        "checkpoint": path,
                        "name": WHOLE_FILE,
                        "a": path,
                        "b": other,
                        "reason": f"file name: {why}",
                    }
                )
        by_content_b: dict[str, list[str]] = {}
        for path in rest_b:
            by_content_b.setdefault(_content_of(b.record, path), []).append(path)
        for path in list(rest_a):
            matches = by_content_b.get(_content_of(a.record, path), [])
            if matches:
                other = matches.pop(0)
                rest_a.remove(path)
                rest_b.remove(other)
                out.renamed.append({"a": path, "b": other, "same_content": True})
                out.verdict = DIFFERENT
        for path in rest_a + rest_b:
            where = a.record.run_dir if path in rest_a else b.record.run_dir
            rule = _ignored_by(self.rules, path, None)
            if rule is not None:
                out.ignored.append(
                    {"checkpoint": path, "name": WHOLE_FILE, "rule": rule, "why": f"only in {where}"}
                )
                continue
            out.verdict = DIFFERENT
            out.notes.append(f"checkpoint {path} exists only in {where}")
        return pairs

    def compare_file(self, path_a: str, path_b: str) -> None:
        a, b, out = self.a, self.b, self.out
        ca, cb = a.record.checkpoint(path_a) or {}, b.record.checkpoint(path_b) or {}
        if ca.get("file_sha256") == cb.get("file_sha256"):
            return
        rule = _ignored_by(self.rules, path_a, None)
        if rule is not None:
            out.ignored.append({"checkpoint": path_a, "name": WHOLE_FILE, "rule": rule})
            return
        real_before, excused_before = self.real_count(), self.excused_count()
        names = differing_tensor_names(ca, cb, contexts=(a.context, b.context))
        names = [n for n in names if not self.ignore_value(path_a, n, None, None)]
        if names == [WHOLE_FILE]:
            self.compare_opaque(path_a, path_b)
        elif names:
            out.verdict = DIFFERENT
            out.differing_tensor_total += len(names)
            shown = names[: max(0, TENSOR_DETAIL_LIMIT - len(out.differences))]
            out.differences.extend(
                _tensor_differences(
                    a.record, b.record, path_a, shown, tensor_details=self.tensor_details, notes=out.notes
                )
            )
            if len(names) > len(shown):
                out.notes.append(
                    f"checkpoint {path_a}: {len(names)} tensors differ; the first {len(shown)} are listed"
                )
        self.compare_values(path_a, path_b)
        if self.real_count() == real_before and self.excused_count() == excused_before:
            out.format_only.append(path_a)

    def real_count(self) -> int:
        return self.out.differing_tensor_total + len(self.out.value_differences) + len(self.out.notes)

    def excused_count(self) -> int:
        return len(self.out.run_specific) + len(self.out.ignored)

    def ignore_value(self, path: str, name: str, va: object, vb: object) -> bool:
        rule = _ignored_by(self.rules, path, name)
        if rule is None:
            return False
        self.out.ignored.append(
            {
                "checkpoint": path,
                "name": name,
                "rule": rule,
                "a": outputvalues.shown(name, va),
                "b": outputvalues.shown(name, vb),
            }
        )
        return True

    def compare_values(self, path_a: str, path_b: str) -> None:
        """Each non-tensor value whose digest differs: ignored, run-specific (with why), or real."""
        a, b = self.a, self.b
        ma = (a.record.checkpoint(path_a) or {}).get("metadata") or {}
        mb = (b.record.checkpoint(path_b) or {}).get("metadata") or {}
        keys = sorted(k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k))
        if not keys:
            return
        values_a = outputvalues.load_values(a.record.output_dir / path_a)
        values_b = outputvalues.load_values(b.record.output_dir / path_b)
        for key in keys:
            if key not in ma or key not in mb:
                if not self.ignore_value(path_a, key, None, None):
                    self.real_value(
                        path_a, key, _presence(key, ma), _presence(key, mb), "present in one run only"
                    )
                continue
            if values_a is None or values_b is None or key not in values_a or key not in values_b:
                if self.ignore_value(path_a, key, None, None):
                    continue
                by_name = reason_by_key(key)  # e.g. against published digests, which hold no values
                if by_name is not None:
                    self.out.run_specific.append(
                        {"checkpoint": path_a, "name": key, "reason": f"{by_name} (judged by its name)"}
                    )
                    continue
                why = "the values could not be read back from both runs' files"
                self.real_value(path_a, key, "<unavailable>", "<unavailable>", why)
                continue
            va, vb = values_a[key], values_b[key]
            if self.ignore_value(path_a, key, va, vb):
                continue
            reason = classify_value(key, va, vb, a.context, b.context)
            if reason is None:
                self.real_value(path_a, key, va, vb, None)
                continue
            self.out.run_specific.append(
                {
                    "checkpoint": path_a,
                    "name": key,
                    "a": outputvalues.shown(key, va),
                    "b": outputvalues.shown(key, vb),
                    "reason": reason,
                }
            )

    def real_value(self, path: str, name: str, va: object, vb: object, why: str | None) -> None:
        self.out.verdict = DIFFERENT
        entry = {
            "checkpoint": path,
            "name": name,
            "a": outputvalues.shown(name, va),
            "b": outputvalues.shown(name, vb),
        }
        if why:
            entry["note"] = why
        self.out.value_differences.append(entry)

    def compare_opaque(self, path_a: str, path_b: str) -> None:
        """Files read as bytes: equal once run-specific text is masked, or a real difference by line."""
        a, b, out = self.a, self.b, self.out
        text_a = outputvalues.read_text(a.record.output_dir / path_a)
        text_b = outputvalues.read_text(b.record.output_dir / path_b)
        if text_a is not None and text_b is not None:
            masked_a, reasons_a = mask(text_a, a.context)
            masked_b, reasons_b = mask(text_b, b.context)
            if masked_a == masked_b:
                line, left, right = outputvalues.first_differing_line(text_a, text_b)
                out.run_specific.append(
                    {
                        "checkpoint": path_a,
                        "name": f"line {line}",
                        "a": outputvalues.shown("", left),
                        "b": outputvalues.shown("", right),
                        "reason": " and ".join(sorted(reasons_a | reasons_b)),
                    }
                )
                return
            line, left, right = outputvalues.first_differing_line(masked_a, masked_b)
            self.real_value(path_a, f"line {line}", left, right, "text; run-specific parts masked")
            return
        out.verdict = DIFFERENT
        out.differing_tensor_total += 1
        out.differences.append({"checkpoint": path_a, "name": WHOLE_FILE})
        why = (a.record.checkpoint(path_a) or {}).get("note") or "not a format read as tensors or values"
        out.notes.append(
            f"checkpoint {path_a}: the file bytes differ and its content cannot be compared ({why})"
        )


def _content_of(record: RunRecord, path: str) -> str:
    return str((record.checkpoint(path) or {}).get("content_sha256"))


def _presence(key: str, metadata: dict[str, Any]) -> str:
    return "<present>" if key in metadata else "<absent>"


def differing_tensor_names(
    a: dict[str, Any], b: dict[str, Any], *, contexts: tuple[RunContext, RunContext] | None = None
) -> list[str]:
    """Tensor names whose digest, dtype or shape differ, or that exist on one side only, in name order.

    With the runs' contexts, names that hold a run's own path (a dict keyed by checkpoint paths) are
    matched once those paths are masked. ``<file>`` stands for a file read as bytes.
    """
    ta = {t["name"]: {k: v for k, v in t.items() if k != "name"} for t in a.get("tensors", [])}
    tb = {t["name"]: {k: v for k, v in t.items() if k != "name"} for t in b.get("tensors", [])}
    if not ta and not tb:
        if a.get("format", "file") == "file" or b.get("format", "file") == "file":
            return [WHOLE_FILE] if a.get("content_sha256") != b.get("content_sha256") else []
        return []
    if contexts is not None and set(ta) != set(tb):
        masked_a = {masked_name(n, contexts[0]): v for n, v in ta.items()}
        masked_b = {masked_name(n, contexts[1]): v for n, v in tb.items()}
        if len(masked_a) == len(ta) and len(masked_b) == len(tb):
            ta, tb = masked_a, masked_b
    return sorted(name for name in set(ta) | set(tb) if ta.get(name) != tb.get(name))


def grade_of(comparison: Comparison) -> tuple[str, str]:
    """The grade and the one sentence that leads the verdict."""
    n = len(comparison.runs)
    if comparison.verdict == FAILED:
        return NO_VERDICT, "no verdict: " + (comparison.notes[0] if comparison.notes else "a run failed")
    if comparison.verdict == IDENTICAL:
        excused = comparison.run_specific or comparison.ignored or comparison.format_only
        if not excused:
            return (
                BIT_IDENTICAL,
                f"bit-identical: every output file is byte for byte the same across {n} runs",
            )
        parts = []
        if comparison.run_specific:
            parts.append(f"{len(comparison.run_specific)} run-specific values (listed)")
        if comparison.ignored:
            parts.append(f"{len(comparison.ignored)} values or files the job file ignores")
        if comparison.format_only:
            parts.append(f"the container bytes of {len(comparison.format_only)} files")
        return REPRODUCED, (
            f"reproduced: every tensor and value is equal across {n} runs, except {', '.join(parts)}"
        )
    return NOT_REPRODUCIBLE, "not reproducible: " + _first_difference(comparison)


def _first_difference(comparison: Comparison) -> str:
    if comparison.value_differences:
        d = comparison.value_differences[0]
        more = len(comparison.value_differences) - 1
        tail = f" (and {more} more values)" if more else ""
        return f"{d['name']} {d['a']!r} vs {d['b']!r} in {d['checkpoint']}{tail}"
    tensors = [d for d in comparison.differences if d.get("name") != WHOLE_FILE]
    if tensors:
        first = tensors[0]
        count = comparison.differing_tensor_total
        return f"{count} tensors differ (first: {first['name']} in {first['checkpoint']})"
    if comparison.renamed:
        names = "; ".join(f"{r['a']} vs {r['b']}" for r in comparison.renamed[:3])
        return f"the output file names differ ({names}); their contents are equal"
    if comparison.differences:
        return f"{comparison.differences[0]['checkpoint']} differs byte for byte"
    return comparison.notes[0] if comparison.notes else "the runs differ"


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
