"""One run's output files against the reference's: tensors, values, text, file names.

Every difference lands in the Comparison, real (``differences``, ``value_differences``, ``renamed``,
``notes``) or excused (``run_specific``, ``ignored``, ``format_only``, ``resharded``); ``grade_of`` then
reads them.
Which files pair up is decided in ``_pairing`` (an archive's members whose names differ by the runs' own
facts, in ``_members``), which tensors differ in ``_tensors``, whether differing
bytes are only the formats' framing in ``_accounting``, what the job file ignores in ``_ignore``, and
which differences of a torch Distributed Checkpoint are only its layout (a reshard) in ``_reshard``,
and text files that no reader parses, line by line and by the values inside a line, in ``_lines``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reprobox import outputvalues
from reprobox.compare import _unreadable
from reprobox.compare._accounting import UNREAD_BYTES, byte_finding
from reprobox.compare._ignore import ignore_rules, ignored_by
from reprobox.compare._lines import JudgedText, judged_texts, stamped_lines_reordered
from reprobox.compare._marks import WHOLE_FILE
from reprobox.compare._members import MemberPairs, pair_members
from reprobox.compare._model import DIFFERENT, TENSOR_DETAIL_LIMIT, Comparison
from reprobox.compare._pairing import FilePairing, Side
from reprobox.compare._renamed_values import Judged, judge_renamed, renamed_values
from reprobox.compare._reshard import Since, fold_reshards
from reprobox.compare._tensors import differing_tensor_names, tensor_differences
from reprobox.compare._timed_tensors import excuse_timed_tensors
from reprobox.records.manifest import RunRecord
from reprobox.runspecific import (
    CONCURRENT_LINES,
    RunContext,
    StructuralPairs,
    for_file,
    mask_file_name,
    reason_by_key,
    unexplained_duration,
)


def compare_pair(a: RunRecord, b: RunRecord, out: Comparison, tensor_details: bool) -> None:
    since = Since.of(out)
    pairing = FilePairing(Side.of(a), Side.of(b), ignore_rules(a), out)
    pairs = pairing.pairs()
    pair = _Pair(pairing.a, pairing.b, pairing.rules, out, tensor_details, pairing.structure)
    counted: dict[str, int] = {}  # the differing tensors each file added
    for path_a, path_b in pairs:
        before = out.differing_tensor_total
        pair.compare_file(path_a, path_b)
        counted[path_a] = out.differing_tensor_total - before
    fold_reshards(a, b, out, pairs=pairs, since=since, counted=counted)


@dataclass
class _Pair:
    """One run against the reference: every difference goes into ``out``, real or excused."""

    a: Side
    b: Side
    rules: list[tuple[str, str | None]]
    out: Comparison
    tensor_details: bool
    structure: StructuralPairs

    def contexts(self, path_a: str, path_b: str) -> tuple[RunContext, RunContext]:
        """Each run's context for one file: the clock readings in its path and the names of the paired
        folders it lies under (or the file it links to) are the run's own names inside it too."""
        return self.context_of(self.a, path_a, 0), self.context_of(self.b, path_b, 1)

    def context_of(self, side: Side, path: str, which: int) -> RunContext:
        names = {path, outputvalues.link_target(side.record.output_dir, path) or path}
        parts = [
            part
            for name in names
            for part in (
                *self.structure.name_parts(mask_file_name(name, side.context)[0], which),
                *for_file(side.context, name).name_parts,
            )
        ]
        return for_file(side.context, path, tuple(parts))

    def compare_file(self, path_a: str, path_b: str) -> None:
        a, b, out = self.a, self.b, self.out
        ca, cb = a.record.checkpoint(path_a) or {}, b.record.checkpoint(path_b) or {}
        rule = ignored_by(self.rules, path_a, None)
        if ca.get("file_sha256") == cb.get("file_sha256"):
            out.compared_files += rule is None  # an ignored file proves nothing, even an equal one
            return
        if rule is not None:
            out.ignored.append({"checkpoint": path_a, "name": WHOLE_FILE, "rule": rule})
            return
        unreadable_before = len(out.unreadable)
        real_before, excused_before = self.real_count(), self.excused_count()
        contexts = self.contexts(path_a, path_b)
        members = pair_members(
            ca, cb, contexts, lambda: (_values(a.record, path_a), _values(b.record, path_b))
        )
        cb = members.renamed(cb)  # run b's members under run a's names, their contents still compared
        out.run_specific.extend(members.entries(path_a))
        names = differing_tensor_names(ca, cb, contexts=contexts)
        names = [n for n in names if not self.ignore_value(path_a, n, None, None)]
        if names and names != [WHOLE_FILE]:
            paths = (path_a, path_b)
            names, timed = excuse_timed_tensors(
                a.record, b.record, paths, names, contexts, name_in_b=members.name_in_b
            )
            out.run_specific.extend(timed)
        if names == [WHOLE_FILE]:
            self.compare_opaque(path_a, path_b, contexts)
        elif names:
            out.verdict = DIFFERENT
            out.differing_tensor_total += len(names)
            shown = names[: max(0, TENSOR_DETAIL_LIMIT - len(out.differences))]
            out.differences.extend(
                tensor_differences(
                    a.record,
                    b.record,
                    path_a,
                    shown,
                    tensor_details=self.tensor_details,
                    notes=out.notes,
                    name_in_b=members.name_in_b,
                )
            )
            if len(names) > len(shown):
                out.notes.append(
                    f"checkpoint {path_a}: {len(names)} tensors differ; the first {len(shown)} are listed"
                )
        self.compare_values(path_a, (ca, cb), members)
        if names != [WHOLE_FILE]:
            self.compare_bytes(path_a, path_b, real_before)
        if len(out.unreadable) > unreadable_before:
            return  # not compared: its format is unknown (see _unreadable)
        out.compared_files += 1
        if self.real_count() == real_before and self.excused_count() == excused_before:
            out.format_only.append(path_a)

    def compare_bytes(self, path_a: str, path_b: str, real_before: int) -> None:
        """Bytes beside the content: container bytes only when both files' readers accounted for every
        byte but the same unread ones (``_accounting``); unread bytes that differ are a real difference,
        bytes no reader said it read leave no verdict."""
        a, b = self.a.record, self.b.record
        finding = byte_finding(a.checkpoint(path_a) or {}, b.checkpoint(path_b) or {})
        if finding is None:
            return
        if finding.kind == "unread":
            self.real_value(path_a, UNREAD_BYTES, finding.a, finding.b, finding.why)
        elif self.real_count() == real_before:  # a file that differs already needs no more said
            entry = _unreadable.describe(a, b, path_a, path_b)
            entry["type"] = f"{(a.checkpoint(path_a) or {}).get('format')} file: {finding.why}"
            self.out.unreadable.append(entry)

    def real_count(self) -> int:
        return self.out.differing_tensor_total + len(self.out.value_differences) + len(self.out.notes)

    def excused_count(self) -> int:
        return len(self.out.run_specific) + len(self.out.ignored)

    def ignore_value(self, path: str, name: str, va: object, vb: object) -> bool:
        rule = ignored_by(self.rules, path, name)
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

    def compare_values(self, path_a: str, records: tuple[Any, Any], members: MemberPairs) -> None:
        """Each non-tensor value whose digest differs (run b's under run a's member names): ignored,
        run-specific (with why), or real."""
        contexts = members.contexts
        ma, mb = (record.get("metadata") or {} for record in records)
        keys = sorted(k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k))
        if not keys:
            return
        values_a, values_b = members.values()
        renamed = renamed_values([k for k in keys if k not in mb], [k for k in keys if k not in ma], contexts)
        named_in_b = {r.key_b for r in renamed.values()}
        for key in keys:
            if key in renamed:
                same = ma[key] == mb[renamed[key].key_b]
                found = judge_renamed(key, renamed[key], same, (values_a, values_b), contexts)
                self.compare_renamed(path_a, key, found)
                continue
            if key in named_in_b:
                continue
            if key not in ma or key not in mb:
                if not self.ignore_value(path_a, key, None, None):
                    self.real_value(
                        path_a, key, _presence(key, ma), _presence(key, mb), "present in one run only"
                    )
                continue
            if values_a is None or values_b is None or key not in values_a or key not in values_b:
                if self.ignore_value(path_a, key, None, None):
                    continue
                by_name = reason_by_key(key, ma)  # e.g. against published digests, which hold no values
                if by_name is not None:
                    self.out.run_specific.append(
                        {
                            "checkpoint": path_a,
                            "name": key,
                            "reason": f"{by_name} (judged by its name)",
                            "evidence": "its name",
                        }
                    )
                    continue
                why = "the values could not be read back from both runs' files"
                self.real_value(path_a, key, "<unavailable>", "<unavailable>", why)
                continue
            va, vb = values_a[key], values_b[key]
            if self.ignore_value(path_a, key, va, vb):
                continue
            excuse = members.judge(key, va, vb, values_a)
            if excuse is None:
                self.real_value(path_a, key, va, vb, unexplained_duration(key, values_a))
                continue
            self.out.run_specific.append(
                {
                    "checkpoint": path_a,
                    "name": key,
                    "a": outputvalues.shown(key, va),
                    "b": outputvalues.shown(key, vb),
                    "reason": excuse.reason,
                    "evidence": excuse.evidence,
                }
            )

    def compare_renamed(self, path: str, key: str, found: Judged) -> None:
        """A value under a name that differs by its run's own facts: excused by name, content compared."""
        if self.ignore_value(path, key, None, None):
            return
        if not found.excused:
            self.real_value(path, key, found.a, found.b, found.reason)
            return
        self.out.run_specific.append(
            {
                "checkpoint": path,
                "name": key,
                "a": outputvalues.shown(key, found.a),
                "b": outputvalues.shown(key, found.b),
                "reason": found.reason,
                "evidence": "the run's own record",
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

    def compare_opaque(self, path_a: str, path_b: str, contexts: tuple[RunContext, RunContext]) -> None:
        """Files read as bytes: equal once run-specific text is masked, or a real difference by line."""
        a, b, out = self.a, self.b, self.out
        text_a = _text(a.record, path_a)
        text_b = _text(b.record, path_b)
        if text_a is not None and text_b is not None:
            judged = judged_texts(text_a, text_b, contexts)
            reordered = judged.a != judged.b and stamped_lines_reordered(text_a, text_b, contexts)
            if judged.a == judged.b or reordered:
                self.excuse_text(path_a, judged, reordered, text_a, text_b)
                return
            line, left, right = outputvalues.first_differing_line(judged.a, judged.b)
            self.real_value(path_a, f"line {line}", left, right, "text; run-specific parts masked")
            return
        entry = _unreadable.describe(a.record, b.record, path_a, path_b)
        if not _unreadable.declared(a.record):
            out.unreadable.append(entry)
            hashed = (a.record.checkpoint(path_a) or {}).get("note")
            if hashed:  # why its content was not read (a limit refused it, a damaged file): compared as bytes
                out.notes.append(f"checkpoint {path_a} is compared as bytes: {hashed}")
            return
        out.verdict = DIFFERENT
        out.differing_tensor_total += 1
        out.differences.append({"checkpoint": path_a, "name": WHOLE_FILE, "unreadable": True})
        why = (a.record.checkpoint(path_a) or {}).get("note") or "not a format read as tensors or values"
        out.notes.append(
            f"checkpoint {path_a} ({entry['type']}) differs byte for byte and reprobox cannot read its "
            f"format ({why}); the job file names it a checkpoint"
        )

    def excuse_text(self, path: str, judged: JudgedText, reordered: bool, text_a: str, text_b: str) -> None:
        """A text equal once run-specific: the lines its masks made equal as one entry (the first of
        them, with every reason), and each token judged inside a line as its own, with its evidence."""
        if judged.masked is not None or reordered or not judged.tokens:
            line, left, right = judged.masked or outputvalues.first_differing_line(text_a, text_b)
            reasons = judged.reasons | ({CONCURRENT_LINES} if reordered else set())
            self.out.run_specific.append(
                {
                    "checkpoint": path,
                    "name": f"line {line}",
                    "a": outputvalues.shown("", left),
                    "b": outputvalues.shown("", right),
                    "reason": " and ".join(sorted(reasons)),
                    "evidence": "the run's own record",
                }
            )
        for line, token in judged.tokens:
            self.out.run_specific.append(
                {
                    "checkpoint": path,
                    "name": f"line {line}",
                    "words": token.words,
                    "a": outputvalues.shown(token.words, token.a),
                    "b": outputvalues.shown(token.words, token.b),
                    "reason": token.excuse.reason,
                    "evidence": token.excuse.evidence,
                }
            )


def _values(record: RunRecord, path: str) -> dict[str, object] | None:
    found = outputvalues.output_file(record.output_dir, path)
    return None if found is None else outputvalues.load_values(found)


def _text(record: RunRecord, path: str) -> str | None:
    found = outputvalues.output_file(record.output_dir, path)
    return None if found is None else outputvalues.read_text(found)


def _presence(key: str, metadata: dict[str, Any]) -> str:
    return "<present>" if key in metadata else "<absent>"
