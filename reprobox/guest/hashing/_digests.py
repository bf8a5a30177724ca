"""The record hashing writes for each output file (the manifest's ``checkpoints``), and reads back.

``CheckpointDigest`` is the schema ``reprobox.run/1`` stores per file; fields added since are optional
when read (``reader``, ``unaccounted``, ``part_of``), so older records still load and say what they knew.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reprobox.errors import UsageError
from reprobox.guest.hashing._layout import Unaccounted


@dataclass(frozen=True)
class TensorDigest:
    """One tensor as the content hash sees it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    sha256: str

    def sort_key(self) -> tuple[str, str, tuple[int, ...], str]:
        return (self.name, self.dtype, self.shape, self.sha256)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> TensorDigest:
        shape = data.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
            raise _bad_record("tensors[].shape", "a list of integers")
        return cls(
            name=_expect_str(data, "name", "tensors[].name"),
            dtype=_expect_str(data, "dtype", "tensors[].dtype"),
            shape=tuple(shape),
            sha256=_expect_str(data, "sha256", "tensors[].sha256"),
        )


@dataclass(frozen=True)
class CheckpointDigest:
    """Everything recorded about one output file; equal ``content_sha256`` means equal weights."""

    path: str
    size: int
    file_sha256: str
    content_sha256: str
    format: str
    tensors: tuple[TensorDigest, ...]
    metadata: dict[str, str] = field(hash=False)
    metadata_sha256: str | None
    note: str | None = None
    reader: str | None = None  # what read the content ("safe pickle reader", ...); None: unknown
    # the bytes no reader accounted for (``_layout``); None: the reader could not say (or format "file",
    # whose bytes are its content, or a record written before bytes were accounted for)
    unaccounted: Unaccounted | None = None
    # the output files (their paths) whose reader reads what this one holds: an OCDBT database's data
    # file is compared through its manifests, its random name and its packing their layout
    part_of: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "size": self.size,
            "file_sha256": self.file_sha256,
            "content_sha256": self.content_sha256,
            "format": self.format,
            "tensors": [t.to_json() for t in self.tensors],
            "metadata": {name: self.metadata[name] for name in sorted(self.metadata)},
            "metadata_sha256": self.metadata_sha256,
            "note": self.note,
            "reader": self.reader,
            "unaccounted": None if self.unaccounted is None else self.unaccounted.to_json(),
        } | ({"part_of": list(self.part_of)} if self.part_of else {})

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CheckpointDigest:
        size = data.get("size")
        if not isinstance(size, int) or isinstance(size, bool):
            raise _bad_record("size", "an integer")
        tensors = data.get("tensors")
        if not isinstance(tensors, list) or not all(isinstance(t, Mapping) for t in tensors):
            raise _bad_record("tensors", "a list of objects")
        metadata = data.get("metadata")
        if not isinstance(metadata, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
        ):
            raise _bad_record("metadata", "an object mapping keys to digests")
        metadata_sha256 = data.get("metadata_sha256")
        note = data.get("note")
        if metadata_sha256 is not None and not isinstance(metadata_sha256, str):
            raise _bad_record("metadata_sha256", "a string or null")
        if note is not None and not isinstance(note, str):
            raise _bad_record("note", "a string or null")
        reader = data.get("reader")  # absent in records written before readers were recorded
        if reader is not None and not isinstance(reader, str):
            raise _bad_record("reader", "a string or null")
        try:  # absent in records written before bytes were accounted for
            unaccounted = Unaccounted.from_json(data.get("unaccounted"))
        except ValueError as exc:
            raise _bad_record("unaccounted", str(exc)) from None
        part_of = data.get("part_of", [])  # absent unless the file is part of another's content
        if not isinstance(part_of, list) or not all(isinstance(p, str) for p in part_of):
            raise _bad_record("part_of", "a list of paths")
        return cls(
            path=_expect_str(data, "path", "path"),
            size=size,
            file_sha256=_expect_str(data, "file_sha256", "file_sha256"),
            content_sha256=_expect_str(data, "content_sha256", "content_sha256"),
            format=_expect_str(data, "format", "format"),
            tensors=tuple(TensorDigest.from_json(t) for t in tensors),
            metadata=dict(metadata),
            metadata_sha256=metadata_sha256,
            note=note,
            reader=reader,
            unaccounted=unaccounted,
            part_of=tuple(part_of),
        )


def _bad_record(field_name: str, expected: str) -> UsageError:
    return UsageError(
        f"checkpoint record field '{field_name}' must be {expected}; the run record is damaged, "
        "so rerun the job to write it again"
    )


def _expect_str(data: Mapping[str, object], key: str, field_name: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise _bad_record(field_name, "a string")
    return value
