"""One run's output files against the reference's: tensors, values, text, file names.

Every difference lands in the Comparison, real (``differences``, ``value_differences``, ``renamed``,
``notes``) or excused (``run_specific``, ``ignored``, ``format_only``); ``grade_of`` then reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from reprobox import outputvalues
from reprobox.compare._model import DIFFERENT, TENSOR_DETAIL_LIMIT, WHOLE_FILE, Comparison
from reprobox.records.manifest import RunRecord
from reprobox.runspecific import RunContext, classify_value, mask, masked_name, reason_by_key


@dataclass(frozen=True)
class _Side:
    """One run of a pair: its record and what names it rather than its results."""

    record: RunRecord
    context: RunContext

    @classmethod
    def of(cls, record: RunRecord) -> _Side:
        return cls(record, RunContext.from_record(str(record.run_dir), record.data))


def _ignore_rules(record: RunRecord) -> list[tuple[str, str | None]]:
    rules = record.compare_ignore
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


def compare_pair(a: RunRecord, b: RunRecord, out: Comparison, tensor_details: bool) -> None:
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
        values_a = _values(a.record, path_a)
        values_b = _values(b.record, path_b)
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
        text_a = _text(a.record, path_a)
        text_b = _text(b.record, path_b)
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


def _values(record: RunRecord, path: str) -> dict[str, object] | None:
    found = outputvalues.output_file(record.output_dir, path)
    return None if found is None else outputvalues.load_values(found)


def _text(record: RunRecord, path: str) -> str | None:
    found = outputvalues.output_file(record.output_dir, path)
    return None if found is None else outputvalues.read_text(found)


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


def _tensor_differences(
    a: RunRecord, b: RunRecord, path: str, names: list[str], *, tensor_details: bool, notes: list[str]
) -> list[dict[str, Any]]:
    plain = [{"checkpoint": path, "name": name} for name in names]
    if not names or not tensor_details or names == ["<file>"]:
        return plain
    file_a = outputvalues.output_file(a.output_dir, path)
    file_b = outputvalues.output_file(b.output_dir, path)
    if file_a is None or file_b is None:
        notes.append(
            f"checkpoint {path}: not a regular file inside both runs' outputs; tensor statistics skipped"
        )
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
