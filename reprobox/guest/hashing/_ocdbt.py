"""A TensorStore OCDBT database read as its keys and values (Orbax's default checkpoint format).

TensorStore's OCDBT key-value store keeps a folder: ``manifest.ocdbt`` (the configuration and the
versions, each a B+tree root), and data files ``d/<32 hex digits>`` named by 128-bit random ids that
TensorStore draws in C++, each a log of values and encoded tree nodes. Orbax writes one database per
process (``ocdbt.process_0/``), then copies each into a root one above them: the root's own B+tree holds
the same keys, its inline values copied and the others pointing at the same bytes of the process
databases' data files (``held_alike`` tells which keys a database above holds so). The
order in which values are packed into data files, and how many files there are, follows the timing of
asynchronous writes; the manifest's ``uuid`` is drawn at random too. None of that is what the database
holds: it is its layout, as a zip's offsets are.

What it holds is the latest version's keys and values: reading a manifest follows its newest root
through the B+tree (``_ocdbt_format`` decodes each unit) to every key, and each value inline in its leaf
or at an offset of a data file. The latest version's commit time is a value (a clock reading, judged as
any other). Older versions (the history of the writes that made the database) are followed only to
account for their tree nodes' bytes, never compared.

Which bytes of which data files were read is kept per file (``spans``): tree nodes are framing, the
latest version's values content; bytes of a data file that nothing reached (an older version's value,
anything appended) are not accounted for. A data file no manifest reached is no part of the database.

The files are untrusted: every path a table gives stays inside the database's folder (no ``..``, no
absolute path, no link out), every reference lies inside its file, heights decrease by one level at a
time down to the leaves (so no cycle), and the counts are bounded (``MAX_NODES``, ``MAX_KEYS``,
``MAX_HEIGHT``, the decoded size of each unit, the file's CPU budget).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from reprobox.guest.filehash import file_sha256
from reprobox.guest.hashing import _ocdbt_format as fmt
from reprobox.guest.hashing._bounds import (
    MAX_ARCHIVE_MEMBERS,
    MAX_IN_MEMORY_BYTES,
    OverLimit,
    budget_running,
    check_cpu_budget,
)
from reprobox.guest.hashing._layout import Layout, Span
from reprobox.guest.hashing._shared_reads import SharedReads

MANIFEST_NAME = "manifest.ocdbt"
DATA_FOLDER = "d"
MAX_NODES = MAX_ARCHIVE_MEMBERS
"""Tree nodes (B+tree and version tree, every version's) one database may hold."""
MAX_KEYS = MAX_ARCHIVE_MEMBERS
"""Keys of the latest version (as an archive's members)."""
MAX_HEIGHT = 32
"""Levels of a B+tree or version tree (TensorStore's trees of millions of keys have a few)."""
MAX_DATA_FILES = 4096
"""Data files one database may point into."""

BOUNDS = (
    f"paths inside the database's folder; every reference inside its file; at most {MAX_HEIGHT} levels, "
    f"each one lower than its parent (no cycles), {MAX_NODES:,} tree nodes, {MAX_KEYS:,} keys and "
    f"{MAX_DATA_FILES:,} data files; each unit's CRC-32C checked and decoded within "
    f"{fmt.MAX_DECODED_BYTES >> 20} MiB, {MAX_IN_MEMORY_BYTES >> 30} GiB of tree nodes in all; "
    "the file's CPU budget"
)


@dataclass
class Database:
    """A database's latest keys and values, and which bytes of which data files it read."""

    folder: Path
    manifest_size: int
    commit_time: int
    values: list[tuple[str, bytes | fmt.Ref]]  # in key order: inline bytes, or where the value lies
    spans: dict[str, tuple[list[Span], list[Span]]] = field(default_factory=dict)  # path: content, framing
    sizes: dict[str, int] = field(default_factory=dict)  # each data file's size as it was read

    def data_file(self, path: str) -> Path:
        return self.folder / path

    def read(self, ref: fmt.Ref) -> bytes:
        """A value's bytes, from its data file (checked against the file's size when it was listed)."""
        with self.data_file(ref.path).open("rb") as stream:
            data = os.pread(stream.fileno(), ref.length, ref.offset)
        if len(data) != ref.length:
            raise ValueError(f"data file {ref.path} is shorter than when it was read")
        return data


class _Reader:
    """One walk over a database: the units it read, bounded, and the bytes they span."""

    def __init__(self, folder: Path, max_decoded: int) -> None:
        self.folder, self.real = folder, folder.resolve()
        self.max_decoded = min(max_decoded or fmt.MAX_DECODED_BYTES, fmt.MAX_DECODED_BYTES)
        self.db = Database(folder, 0, 0, [])
        self.nodes: dict[fmt.Ref, fmt.Node] = {}
        self.decoded = 0

    def size_of(self, path: str) -> int:
        """The data file's size, once it is proven a regular file inside the folder."""
        if path not in self.db.sizes:
            parts = path.split("/")
            if (
                path.startswith("/")
                or "\\" in path
                or "\0" in path
                or any(p in ("", ".", "..") for p in parts)
            ):
                raise ValueError(f"a data file path {path[:80]!r} leaves the database's folder")
            where = self.folder / path
            if where.is_symlink() or not where.is_file() or not where.resolve().is_relative_to(self.real):
                raise ValueError(f"data file {path[:80]} is not a regular file inside the database's folder")
            if len(self.db.sizes) >= MAX_DATA_FILES:
                raise OverLimit(f"it points into more than {MAX_DATA_FILES} data files")
            self.db.sizes[path] = where.stat().st_size
        return self.db.sizes[path]

    def mark(self, ref: fmt.Ref, content: bool) -> None:
        if ref.offset + ref.length > self.size_of(ref.path):
            raise OverLimit(f"a reference reaches past the end of data file {ref.path}")
        spans = self.db.spans.setdefault(ref.path, ([], []))
        spans[0 if content else 1].append((ref.offset, ref.offset + ref.length))

    def unit(self, ref: fmt.Ref) -> bytes:
        """A tree node's encoded bytes, counted against the bounds."""
        self.mark(ref, content=False)
        if len(self.nodes) >= MAX_NODES:
            raise OverLimit(f"it holds more than {MAX_NODES:,} tree nodes")
        self.decoded += ref.length
        if self.decoded > MAX_IN_MEMORY_BYTES:
            raise OverLimit(f"its tree nodes span more than {MAX_IN_MEMORY_BYTES >> 30} GiB")
        check_cpu_budget(f"{len(self.nodes)} tree nodes read")
        return self.db.read(ref)

    def node(self, ref: fmt.Ref, height: int) -> fmt.Node:
        """A B+tree node, decoded once however many versions share it; its height the one expected."""
        found = self.nodes.get(ref)
        if found is None:
            found = fmt.btree_node(
                self.unit(ref), f"the B+tree node at {ref.path}:{ref.offset}", ref.base, self.max_decoded
            )
            self.nodes[ref] = found
        if found.height != height:
            raise ValueError(
                f"the B+tree node at {ref.path}:{ref.offset} has height {found.height}, not {height}"
            )
        return found

    def tree(self, root: fmt.Ref, height: int) -> None:
        """Every node under an older version's root, each read once (their bytes are framing)."""
        pending = [(root, height)]
        seen: set[fmt.Ref] = set()
        while pending:
            ref, level = pending.pop()
            if ref in seen:
                continue
            seen.add(ref)
            pending.extend((child, level - 1) for _n, child in self.node(ref, level).children)

    def entries(self, root: fmt.Ref, height: int) -> None:
        """The latest version's keys and values, in key order (each key once: a node reached twice is
        refused by the order check)."""
        pending: list[tuple[fmt.Ref, int, bytes]] = [(root, height, b"")]
        previous: bytes | None = None
        while pending:
            ref, level, prefix = pending.pop()
            node = self.node(ref, level)
            if level:
                children = [
                    (c, level - 1, prefix + k[:n]) for k, (n, c) in zip(node.keys, node.children, strict=True)
                ]
                pending.extend(reversed(children))
                continue
            for key, value in zip(node.keys, node.values, strict=True):
                full = prefix + key
                if previous is not None and full <= previous:
                    raise ValueError("its B+tree lists a key twice or out of order")
                previous = full
                if isinstance(value, fmt.Ref):
                    self.mark(value, content=True)
                if len(self.db.values) >= MAX_KEYS:
                    raise OverLimit(f"its latest version holds more than {MAX_KEYS:,} keys")
                self.db.values.append((full.decode("utf-8", "backslashreplace"), value))

    def versions(self, nodes: list[fmt.VersionNode], arity: int) -> list[fmt.Version]:
        """Every older version the version tree holds (its nodes are framing)."""
        found: list[fmt.Version] = []
        pending = [(node.ref, node.height) for node in nodes]
        seen: set[fmt.Ref] = set()
        while pending:
            ref, level = pending.pop()
            if ref in seen or not 0 <= level <= min(MAX_HEIGHT, 63 // arity):
                raise ValueError(
                    f"its version tree reaches the node at {ref.path}:{ref.offset} twice or too deep"
                )
            seen.add(ref)
            what = f"the version tree node at {ref.path}:{ref.offset}"
            height, versions, children = fmt.version_node(self.unit(ref), what, ref.base, self.max_decoded)
            if height != level:
                raise ValueError(f"{what} has height {height}, not {level}")
            found.extend(versions)
            pending.extend((child.ref, child.height) for child in children)
        return found


def _read_database(manifest: Path) -> Database:
    data = manifest.read_bytes()
    config, inline, nodes = fmt.manifest(data, manifest.name)
    reader = _Reader(manifest.parent, config.max_decoded_node_bytes)
    reader.db.manifest_size = len(data)
    older = reader.versions(nodes, config.arity_log2)
    latest = inline[-1]
    reader.db.commit_time = latest.commit_time
    for version in [*older, *inline]:
        if version.height > MAX_HEIGHT:
            raise OverLimit(f"a version's B+tree is {version.height} levels high, over {MAX_HEIGHT}")
        if version.root is not None and version is not latest:
            reader.tree(version.root, version.height)
    if latest.root is not None:
        reader.entries(latest.root, latest.height)
    return reader.db


def data_file_layout(db: Database, path: str) -> Layout | None:
    """The bytes of one data file the database read (None: it read none of the file)."""
    if path not in db.spans:
        return None
    content, framing = db.spans[path]
    return Layout.of(db.sizes[path], content, framing)


def held_alike(db: Database, above: Database) -> set[str]:
    """The keys of ``db`` that ``above`` holds too, each with the same value at the same place: the same
    inline bytes, or the same bytes of the same data file (Orbax's root database holds its process
    databases' keys so, pointing into their data files). Comparing them under ``above`` compares them."""
    files = {path: (db.data_file(path).resolve(), size) for path, size in db.sizes.items()}
    theirs = {path: (above.data_file(path).resolve(), size) for path, size in above.sizes.items()}
    mine = dict(db.values)
    found: set[str] = set()
    for key, value in above.values:
        own = mine.get(key)
        if isinstance(own, bytes) and isinstance(value, bytes):
            alike = own == value
        elif isinstance(own, fmt.Ref) and isinstance(value, fmt.Ref):
            alike = (own.offset, own.length) == (value.offset, value.length) and (
                files[own.path] == theirs[value.path]
            )
        else:
            alike = False
        if alike:
            found.add(key)
    return found


def read_database(manifest: Path) -> Database:
    """The database whose manifest this is, read once for the manifest and each of its data files (the
    last few kept, by the manifest's path and bytes: a data file is written once and never changed)."""
    key = (str(manifest.resolve()), file_sha256(manifest))
    return _DATABASES.get(key, lambda: _read_database(manifest), reuse=budget_running())


_DATABASES: SharedReads[Database] = SharedReads(kept=4)
