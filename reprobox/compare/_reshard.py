"""A torch Distributed Checkpoint saved in another layout (a reshard), told apart from a change of numbers.

DCP's index (``.metadata``) names every tensor by its fully qualified name; its reader digests each tensor
assembled from its chunks under that name, and records how it was cut apart, under ``layout.`` names
(see ``reprobox.guest.hashing._dcp_assembled``). Two runs that saved the same weights over another number
of ranks differ chunk by chunk in their ``.distcp`` shards, in those ``layout.`` names, and by shards
present in one run only, although every tensor and value is the same.

Those differences are the layout, not the numbers: once the runs' differences are found, the ones that
only say how the folder was cut are taken out, and the folder is listed as resharded. What the numbers
are is then said by name: each tensor by its assembled digest (a tensor that differs is named by its fqn
in the index), each other value by its digest wherever it lies among the shards. Where that cannot be
told for certain (a tensor not assembled, chunks that do not cover it, shard bytes no reader read, a
value in two shards of one run) nothing is taken out, and the differences stand as found.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from reprobox import outputvalues
from reprobox.compare._accounting import UNREAD_BYTES
from reprobox.compare._marks import WHOLE_FILE
from reprobox.compare._model import DIFFERENT, TENSOR_DETAIL_LIMIT, Comparison
from reprobox.records.manifest import RunRecord

INDEX = ".metadata"
SHARD_SUFFIX = ".distcp"
LAYOUT = "layout."
CHUNKS = "layout.chunks."
MOVED = "present in one run only"  # how a value in one shard of one run only is listed
WHOLE_TENSOR = "whole tensor differs"  # assembled from its chunks


@dataclass(frozen=True)
class Since:
    """Where the comparison stood before one run was compared with the reference: what came after is
    that pair's."""

    verdict: str
    differences: int
    values: int
    one_sided: int
    notes: int
    renamed: int

    @classmethod
    def of(cls, out: Comparison) -> Since:
        return cls(
            out.verdict,
            len(out.differences),
            len(out.value_differences),
            len(out.one_sided),
            len(out.notes),
            len(out.renamed),
        )

    def added(self, out: Comparison) -> bool:
        """Whether anything real was listed after this point."""
        return (
            len(out.differences) > self.differences
            or len(out.value_differences) > self.values
            or len(out.one_sided) > self.one_sided
            or len(out.notes) > self.notes
            or len(out.renamed) > self.renamed
        )


def fold_reshards(
    a: RunRecord,
    b: RunRecord,
    out: Comparison,
    *,
    pairs: Sequence[tuple[str, str]],
    since: Since,
    counted: dict[str, int],
) -> None:
    """Take the layout's differences out of each DCP folder the two runs cut otherwise, list the folder in
    ``out.resharded``, and name what differs in numbers by fqn. ``counted``: the tensors each file added
    to ``out.differing_tensor_total``."""
    folded = False
    for index_a, index_b in pairs:
        if PurePosixPath(index_a).name == INDEX and _is_index(a, index_a) and _is_index(b, index_b):
            folded = _Folder(a, b, index_a, index_b, out, since, counted).fold() or folded
    if folded and since.verdict != DIFFERENT and not since.added(out):
        out.verdict = since.verdict  # only the layout differed


@dataclass
class _Folder:
    a: RunRecord
    b: RunRecord
    index_a: str
    index_b: str
    out: Comparison
    since: Since
    counted: dict[str, int]

    def fold(self) -> bool:
        """Whether the folder was cut otherwise and its differences are now said by name."""
        layout = [
            v for v in self.new_values() if v["checkpoint"] == self.index_a and v["name"].startswith(LAYOUT)
        ]
        if not layout or not self.accounted():
            return False
        values_a, values_b = self.index_values(self.a, self.index_a), self.index_values(self.b, self.index_b)
        tensors = _tensor_names(values_a) | _tensor_names(values_b)
        if (
            values_a is None
            or values_b is None
            or not all(_assembled(values_a, fqn) and _assembled(values_b, fqn) for fqn in tensors)
        ):
            return False
        stored_a = _shard_values(self.a, self.shards(self.a))
        stored_b = _shard_values(self.b, self.shards(self.b))
        if stored_a is None or stored_b is None:
            return False
        changed = sorted(fqn for fqn in tensors if values_a[fqn] != values_b[fqn])
        self.take_out(tensors)
        values_before = len(self.out.value_differences)
        self.name_changes(changed, stored_a, stored_b)
        self.out.resharded.append(
            {
                "checkpoint": str(PurePosixPath(self.index_a).parent),
                "a": _cut(self.shards(self.a), values_a),
                "b": _cut(self.shards(self.b), values_b),
                "run": str(self.b.run_dir),
                "tensors": len(tensors),
                "values": len(set(stored_a) | set(stored_b)),
                "differing_tensors": len(changed),
                "differing_values": len(self.out.value_differences) - values_before,
            }
        )
        return True

    def new_values(self) -> list[dict[str, Any]]:
        return self.out.value_differences[self.since.values :]

    def in_folder(self, path: object) -> bool:
        folders = {PurePosixPath(self.index_a).parent, PurePosixPath(self.index_b).parent}
        return isinstance(path, str) and path.endswith(SHARD_SUFFIX) and PurePosixPath(path).parent in folders

    def shards(self, record: RunRecord) -> list[str]:
        return sorted(str(c["path"]) for c in record.checkpoints if self.in_folder(c.get("path")))

    def accounted(self) -> bool:
        """Every shard read item by item, with no byte left unread, and nothing about the index or the
        shards that the layout cannot explain (bytes no reader read, a file read as bytes)."""
        for record in (self.a, self.b):
            for path in self.shards(record):
                entry = record.checkpoint(path) or {}
                unread = entry.get("unaccounted")
                if entry.get("format") != "dcp" or not isinstance(unread, dict) or unread.get("count") != 0:
                    return False
        mine = {self.index_a, *self.shards(self.a)}
        unread = any(v["checkpoint"] in mine and v["name"] == UNREAD_BYTES for v in self.new_values())
        opaque = any(
            d.get("checkpoint") in mine and (d.get("name") == WHOLE_FILE or d.get("unreadable"))
            for d in self.out.differences[self.since.differences :]
        )
        return not unread and not opaque

    @staticmethod
    def index_values(record: RunRecord, path: str) -> dict[str, object] | None:
        found = outputvalues.output_file(record.output_dir, path)
        return None if found is None else outputvalues.load_values(found)

    def take_out(self, tensors: set[str]) -> None:
        """The layout's differences leave the lists: the shards' chunks and moved values, the index's
        ``layout.`` names and per-tensor digests (said again below by fqn where they differ), the shards
        present in one run only, and the notes on them."""
        out, since = self.out, self.since
        shards = {*self.shards(self.a), *self.shards(self.b)}
        kept = [d for d in out.differences[since.differences :] if d.get("checkpoint") not in shards]
        out.differing_tensor_total -= sum(self.counted.get(path, 0) for path in self.shards(self.a))
        out.differences[since.differences :] = kept

        def layout_only(v: dict[str, Any]) -> bool:
            if v["checkpoint"] == self.index_a:
                return v["name"].startswith(LAYOUT) or v["name"] in tensors
            return v["checkpoint"] in shards and v.get("note") == MOVED

        out.value_differences[since.values :] = [v for v in self.new_values() if not layout_only(v)]
        sided = out.one_sided[since.one_sided :]
        out.one_sided[since.one_sided :] = [o for o in sided if o["checkpoint"] not in shards]
        about = tuple(f"checkpoint {path}" for path in shards)
        out.notes[since.notes :] = [n for n in out.notes[since.notes :] if not n.startswith(about)]

    def name_changes(
        self, changed: list[str], stored_a: dict[str, tuple[str, str]], stored_b: dict[str, tuple[str, str]]
    ) -> None:
        """What differs in numbers, by name: each tensor whose assembled digest differs, and each value
        that lies in other shards in the two runs and differs (one in the same shard in both was judged
        there, and stays as it was judged)."""
        out = self.out
        for fqn in changed:
            out.verdict = DIFFERENT
            out.differing_tensor_total += 1
            if len(out.differences) < TENSOR_DETAIL_LIMIT:
                out.differences.append({"checkpoint": self.index_a, "name": fqn, "note": WHOLE_TENSOR})
        for name in sorted(set(stored_a) | set(stored_b)):
            where_a, digest_a = stored_a.get(name, ("", ""))
            where_b, digest_b = stored_b.get(name, ("", ""))
            if digest_a == digest_b or (where_a and where_a == where_b):
                continue
            out.verdict = DIFFERENT
            out.value_differences.append(
                {
                    "checkpoint": where_a or where_b,
                    "name": name,
                    "a": _value_in(self.a, where_a, name),
                    "b": _value_in(self.b, where_b, name),
                    "note": f"in {where_a or 'no shard'} vs {where_b or 'no shard'} (resharded)",
                }
            )


def _is_index(record: RunRecord, path: str) -> bool:
    return (record.checkpoint(path) or {}).get("format") == "dcp"


def _tensor_names(values: dict[str, object] | None) -> set[str]:
    return {name[len(CHUNKS) :] for name in values or {} if name.startswith(CHUNKS)}


def _assembled(values: dict[str, object], fqn: str) -> bool:
    """Whether the tensor's digest is of the whole tensor: assembled, from chunks that cover it."""
    digest, size, chunks = values.get(fqn), values.get(f"{fqn}.size"), values.get(CHUNKS + fqn)
    if not isinstance(digest, str) or not digest.startswith("sha256:"):
        return False  # not assembled (a limit): its chunks alone were hashed
    if not isinstance(size, list) or not isinstance(chunks, list):
        return False
    try:
        covered = sum(math.prod(int(n) for n in chunk["sizes"]) for chunk in chunks)
        return covered == math.prod(int(n) for n in size)
    except (TypeError, KeyError, ValueError):
        return False


def _shard_values(record: RunRecord, shards: list[str]) -> dict[str, tuple[str, str]] | None:
    """Each value the shards hold other than tensor chunks: its shard and digest; None when one name lies
    in two shards of the run (which of them the index means cannot be told here)."""
    found: dict[str, tuple[str, str]] = {}
    for path in shards:
        for name, digest in ((record.checkpoint(path) or {}).get("metadata") or {}).items():
            if name in found:
                return None
            found[name] = (path, str(digest))
    return found


def _value_in(record: RunRecord, shard: str, name: str) -> str:
    """A value as shown in the verdict, read back from the shard that holds it."""
    if not shard:
        return "<absent>"
    found = outputvalues.output_file(record.output_dir, shard)
    values = None if found is None else outputvalues.load_values(found)
    return outputvalues.shown(name, values[name]) if values and name in values else "<unavailable>"


def _cut(shards: list[str], values: dict[str, object]) -> dict[str, Any]:
    """How one run cut the folder: its shards and the number of tensor chunks."""
    chunks = sum(len(v) for name, v in values.items() if name.startswith(CHUNKS) and isinstance(v, list))
    return {"shards": [PurePosixPath(path).name for path in shards], "chunks": chunks}


def layout_text(entry: dict[str, Any]) -> str:
    """``checkpoint (resharded: 2 shards, 36 chunks vs 1 shard, 18 chunks)``."""

    def side(cut: dict[str, Any]) -> str:
        shards, chunks = len(cut.get("shards") or []), int(cut.get("chunks") or 0)
        return f"{shards} shard{'' if shards == 1 else 's'}, {chunks} chunk{'' if chunks == 1 else 's'}"

    folder = entry["checkpoint"] if entry["checkpoint"] != "." else "the output folder"
    return f"{folder} (resharded: {side(entry['a'])} vs {side(entry['b'])})"
