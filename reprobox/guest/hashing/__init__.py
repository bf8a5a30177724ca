"""Canonical checkpoint hashing: equal weights give equal digests whatever container holds them.

A checkpoint's file sha256 changes with the container's bytes (zip layout, key insertion order, torch.save
versus safetensors); its *content hash* changes only with the tensors. Both are recorded, so a rerun that
wrote the same weights through a different writer still counts as reproduced.

The contract (other modules and tools recompute it, so it must not drift):

- A tensor's ``sha256`` is over its raw element bytes in row-major (C-contiguous) order, little-endian,
  exactly as stored: bf16, float8, bool and complex values are hashed as their bytes, never converted.
- ``content_sha256`` is ``sha256(json.dumps(rows, separators=(",", ":"), ensure_ascii=True).encode())``
  where ``rows`` is the list of ``[name, dtype, [dim, ...], sha256]`` for every tensor, sorted in Python
  list order (name by code point, then dtype, then shape, then sha256).
- Tensor names are dotted paths into the saved object: mapping keys via ``str(key)``, sequence
  positions as decimal indices (``model.fc.weight``, ``optimizer.state.0.exp_avg``); the root is ``""``.
- dtype names are torch's without the ``torch.`` prefix (``float32``, ``bfloat16``, ``float8_e4m3fn``);
  safetensors and NumPy dtypes are mapped onto the same names.
- Non-tensor values are not part of the content hash. Mappings are always descended; a list or tuple
  is descended only when it holds a tensor, mapping, list or tuple, otherwise it is one value (so
  ``betas`` stays one key). Each value is recorded only as the sha256 of its canonical JSON
  (``json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)`` after
  mapping tuples and ``torch.Size`` to lists, bytes to ``{"bytes": hex}``, complex to ``{"complex": [re,
  im]}``, sets to ``{"set": [...]}`` sorted, and other objects to ``{"object": type, "repr": repr}``):
  values may hold secrets, digests do not show them. When two values flatten to the same key, that key's
  digest is the sha256 of their sorted digests joined by newlines.
- ``metadata_sha256`` is the sha256 of the canonical JSON of the key -> digest mapping; it is ``None``
  for format ``"file"``.
- A file of values alone (``"json"``, ``"jsonl"``, ``"yaml"``, ``"csv"``, ``"tsv"``, ``"tensorboard"``,
  ``"mlflow"``, ``"wandb"``) has no tensors: its ``content_sha256`` is its ``metadata_sha256``.
- An archive (``"zip"``, ``"tar"``: not torch's own zip, not an ``.npz``) is read as a folder: each
  member by the reader it would have as a file, what it holds named ``<member path>/<name inside>``
  (``policy.pth/mlp_extractor.policy_net.0.weight``, ``data/learning_rate``); a member's root tensor or
  value is the member path itself; a member no reader reads is one value, its text, when it is short
  UTF-8 (any other such member leaves the whole archive read as bytes, format ``"file"``); a name seen
  twice in one archive gets ``#2``. Its tensors make its ``content_sha256`` as any file's do; with
  none, it is its ``metadata_sha256``. Member times, order and compression are not part of either.
  A gzip, bzip2 or xz file (``"compressed"``) is an archive of one member, the file named without its
  compression suffix (``metrics.json/loss``).
- An HDF5 file (``"hdf5"``) names each dataset by its path in the file without the leading slash
  (``layers/dense/vars/0``) and each attribute as ``<object path>@<name>`` (``@name`` on the root); a
  second link to an object already read is the value ``hard link to /<first path>``, a soft link
  ``soft link to <target>``. Object times and the storage layout (contiguous, chunked, compressed) are
  not part of either hash.
- A torch Distributed Checkpoint (``"dcp"``): its ``.metadata`` index is values (per tensor ``<fqn>`` the
  sha256 of the tensor assembled from its chunks, ``<fqn>.dtype``, ``<fqn>.size``; the cut under ``layout.``;
  ``storage_meta.save_id``), each ``.distcp`` shard its items, a chunk as ``<fqn>@<offsets>`` (``_dcp``).
- An OCDBT database (``"ocdbt"``): ``manifest.ocdbt`` holds its latest keys (zarr arrays as tensors by key,
  others as values, ``commit_time_ns``), but for those a database above holds alike (Orbax's root over
  its process databases: compared there, once); a data file it reached, nothing, ``part_of`` naming them.
- A TorchScript archive (``"torchscript"``, ``torch.jit.save``) and a torch.export PT2 archive (``"pt2"``)
  are read member by member (``_torch_archive``): the module's tensors and values as ``data.pkl`` names
  them, a PT2 archive's weights and constants by FQN, every other member under its path
  (``constants.pkl/c0``, ``code/__torch__.py`` its text, ``models/model.json/...``); the
  ``.data/serialization_id`` torch derives from the records is a value, its record-name half alone
  when its CRC half is the records' (``_torch_archive``).
- An SQLite database (``"sqlite"``) is values alone: ``<table>/<key>/<column>`` for every row (the key
  ``<column>=<value>`` for each primary-key column, joined by ``,``, else ``row=<n>``, its place in
  rowid order), a BLOB as
  ``{"sha256": hex, "bytes": n}``, each schema entry ``sqlite_schema/<type>/<name>`` its SQL, and
  ``sqlite_header/user_version`` and ``sqlite_header/application_id``.
- A UBJSON document (``"ubjson"``: XGBoost's ``.ubj``) is named as a JSON file is; an array of one
  numeric type (``[$d#...``) is a tensor of that dtype under its name.
- ``format`` says how ``content_sha256`` was made: ``"torch"``, ``"torchscript"``, ``"pt2"``, ``"ocdbt"``,
  ``"safetensors"``, ``"numpy"``, ``"hdf5"``, ``"ubjson"``, ``"dcp"`` or ``"pickle"`` from the tensors,
  ``"file"`` when it is the file sha256 (other files, and checkpoints whose content could not be read
  safely; ``note`` then says why). ``reader`` names what read the content. Nothing a pickle names is
  ever imported or run: torch files and pickles are read by the safe pickle reader (``_pickle``),
  without torch, and its stand-in objects flatten as mappings.
- ``unaccounted`` says which bytes no reader accounted for, neither parsed as content nor known to be
  the format's framing (``_layout``): ``{"bytes", "count", "ranges" (the first 16 [start, end]),
  "sha256"}``, the sha256 over each such range's length (8 bytes, little-endian) then its bytes, in file
  order; ``bytes`` 0 when the reader accounted for every byte; ``null`` when the reader cannot say (and
  for format ``"file"``, whose bytes are its content). Not part of ``content_sha256``.

Hashing runs on a thread pool: hashlib releases the GIL on large buffers, so tensors (and each file's
own sha256, one more task) hash on all cores.

This module holds the pool and the entry points; the contract's serialisations and the flattening are in
``_canonical`` and the records in ``_digests``; which bytes each reader accounted for in ``_layout`` (zip
framing in ``_ziplayout``, archives' in ``_archive_layout``); which reader a file goes to is the one
table in ``_readers`` (each row: what it recognises, its plan for hashing, its load for comparison, its
bounds); the readers are ``_formats`` (torch and pickles, on ``_pickle``), ``_torchscript`` and ``_pt2``
(on ``_torch_archive``), ``_safetensors``,
``_numpy_files``, ``_hdf5``, ``_text``, ``_logformats`` (TensorBoard with ``_graphdef``, MLflow, W&B),
``_sqlite`` (databases, row by row), ``_ubjson`` (XGBoost's models) and ``_archives`` (zip and tar, and
with ``_compressed`` single gzip, bzip2 and xz files, through the same table), byte sources in
``_arrays``, each within the limits of ``_bounds``; the output-file selection in ``_select``;
``load_tensors`` in ``_readers``, with each format's loaders in ``_load``.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import posixpath
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.guest.filehash import FILE_CHUNK_BYTES, file_sha256
from reprobox.guest.hashing._arrays import (
    _Array,
    _Content,
    _ContentError,
    _opaque,
)
from reprobox.guest.hashing._canonical import (
    content_sha256,
    flatten,
    metadata_sha256,
    torch_dtype_name,
)
from reprobox.guest.hashing._digests import CheckpointDigest, TensorDigest
from reprobox.guest.hashing._layout import Unaccounted, unaccounted_of
from reprobox.guest.hashing._readers import (
    READERS,
    Reader,
    format_of,
    load_tensors,
    load_values,
    reader_for,
)
from reprobox.guest.hashing._readers import (
    plan as _plan,
)
from reprobox.guest.hashing._select import (
    _files_under,
    _matches,
    _pattern_parts,
)

__all__ = [
    "COPY_BUDGET_BYTES",
    "FILE_CHUNK_BYTES",
    "READERS",
    "CheckpointDigest",
    "Reader",
    "TensorDigest",
    "content_digest",
    "content_sha256",
    "default_workers",
    "file_sha256",
    "flatten",
    "format_of",
    "hash_checkpoint",
    "hash_outputs",
    "load_tensors",
    "load_values",
    "metadata_sha256",
    "reader_for",
    "torch_dtype_name",
]

COPY_BUDGET_BYTES = 8 << 20
"""A non-contiguous tensor is copied to contiguous memory at most this many bytes at a time."""


# --- running the hashes --------------------------------------------------------------------------


def default_workers() -> int:
    """The cores this process may run on (its CPU affinity, not the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _sha256_array(array: _Array) -> str:
    digest = hashlib.sha256()
    for buffer in array.buffers(COPY_BUDGET_BYTES):  # looked up as each tensor is hashed
        digest.update(buffer)
    return digest.hexdigest()


@dataclass
class _Pending:
    """One file whose hashes are running on the pool."""

    path: Path
    relpath: str
    file_sha256: concurrent.futures.Future[str]
    content: _Content
    array_sha256: list[concurrent.futures.Future[str]]
    unaccounted: concurrent.futures.Future[Unaccounted] | None  # None: the reader could not account
    strict: bool = False  # a content refused by a limit is an error (``reprobox hash``), not a note

    def result(self) -> CheckpointDigest:
        try:
            whole_file = self.file_sha256.result()
            size = self.path.stat().st_size
            content = self.content
            try:
                shas = [f.result() for f in self.array_sha256]
            except _ContentError as exc:
                content, shas = _opaque(str(exc), exc.refusal), []
            unaccounted = None if self.unaccounted is None else self.unaccounted.result()
        except OSError as exc:
            raise _read_problem(self.path, exc) from exc
        if self.strict and content.refusal is not None:
            raise UsageError(
                f"{self.path} is refused: {content.refusal}; reprobox reads no checkpoint beyond its limits "
                "(a damaged or hostile file): write it again, or compare its bytes (sha256sum)"
            )
        if content.format == "file":
            return CheckpointDigest(
                self.relpath, size, whole_file, whole_file, "file", (), {}, None, content.note, content.reader
            )
        tensors = tuple(
            sorted(
                (
                    TensorDigest(a.name, a.dtype, a.shape, sha)
                    for a, sha in zip(content.arrays, shas, strict=True)
                ),
                key=TensorDigest.sort_key,
            )
        )
        values_only = not tensors and content.values_only
        values_sha256 = metadata_sha256(content.metadata)  # once: a log's values may number millions
        return CheckpointDigest(
            path=self.relpath,
            size=size,
            file_sha256=whole_file,
            # a file of values alone (JSON, YAML, CSV, logs) is its values: equal values, equal content
            content_sha256=values_sha256 if values_only else content_sha256(tensors),
            format=content.format,
            tensors=tensors,
            metadata={name: content.metadata[name] for name in sorted(content.metadata)},
            metadata_sha256=values_sha256,
            note=content.note,
            reader=content.reader,
            unaccounted=unaccounted,
            part_of=tuple(
                posixpath.normpath(posixpath.join(posixpath.dirname(self.relpath), other))
                for other in content.part_of
            ),
        )


def _read_problem(path: Path, exc: OSError) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"cannot read output file {path} ({exc.strerror or exc}); make sure the job leaves its outputs "
        "readable and does not remove them while they are hashed"
    )


def _submit(
    pool: concurrent.futures.ThreadPoolExecutor, path: Path, relpath: str, *, strict: bool = False
) -> _Pending:
    whole_file = pool.submit(file_sha256, path)  # the largest task: start it first
    try:
        content = _plan(path)
    except OSError as exc:
        raise _read_problem(path, exc) from exc
    largest_first = sorted(content.arrays, key=lambda a: a.nbytes, reverse=True)
    futures = {id(a): pool.submit(_sha256_array, a) for a in largest_first}
    layout = content.layout if content.format != "file" else None  # a file read as bytes is its bytes
    unaccounted = None if layout is None else pool.submit(unaccounted_of, path, layout)
    arrays = [futures[id(a)] for a in content.arrays]
    return _Pending(path, relpath, whole_file, content, arrays, unaccounted, strict)


def _check_workers(workers: int | None) -> int:
    if workers is None:
        return default_workers()
    if workers < 1:
        raise UsageError(f"workers must be at least 1, not {workers}; omit it to use every available core")
    return workers


def _hash_files(
    files: Sequence[tuple[Path, str]], workers: int | None, *, strict: bool = False
) -> list[CheckpointDigest]:
    """Hash files on one pool, planning a few files ahead so small and large ones overlap."""
    count = _check_workers(workers)
    ahead = max(2, 2 * count)
    results: list[CheckpointDigest] = []
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=count, thread_name_prefix="reprobox-hash")
    try:
        window: deque[_Pending] = deque()
        for path, relpath in files:
            window.append(_submit(pool, path, relpath, strict=strict))
            if len(window) > ahead:
                results.append(window.popleft().result())
        while window:
            results.append(window.popleft().result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results


def _relative_posix(path: Path, root: Path) -> str:
    absolute, base = Path(os.path.normpath(path.absolute())), Path(os.path.normpath(root.absolute()))
    try:
        return absolute.relative_to(base).as_posix()
    except ValueError:
        raise UsageError(
            f"checkpoint {path} is not inside {root}; pass relative_to= the output directory that holds it"
        ) from None


def hash_checkpoint(
    path: Path, *, relative_to: Path, workers: int | None = None, strict: bool = False
) -> CheckpointDigest:
    """Digest one checkpoint: its file sha256 and canonical content hash, hashed in parallel.

    A file whose content a reader's limit refused (``_bounds``) is digested by its bytes with a note
    saying why; with ``strict`` (``reprobox hash``) it raises UsageError naming the file and the limit.
    """
    return _hash_files([(path, _relative_posix(path, relative_to))], workers, strict=strict)[0]


def content_digest(path: Path, *, workers: int | None = None) -> tuple[str, tuple[TensorDigest, ...]]:
    """The content hash and tensor digests alone, without the file's own sha256 (benchmarks, tools)."""
    content = _plan(path)
    if content.format == "file":
        return file_sha256(path), ()
    largest_first = sorted(content.arrays, key=lambda a: a.nbytes, reverse=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=_check_workers(workers)) as pool:
        shas = list(pool.map(_sha256_array, largest_first))
    tensors = tuple(
        sorted(
            (TensorDigest(a.name, a.dtype, a.shape, sha) for a, sha in zip(largest_first, shas, strict=True)),
            key=TensorDigest.sort_key,
        )
    )
    return content_sha256(tensors), tensors


def hash_outputs(
    output_dir: Path, patterns: Sequence[str], *, workers: int | None = None
) -> list[CheckpointDigest]:
    """Digest the files under ``output_dir`` matching ``patterns`` (every file when empty), by path.

    Patterns are relative globs: ``*``, ``?`` and ``[...]`` match within one path component and ``**``
    matches any number of directories. Symbolic links to directories are not descended; a symbolic link
    to a file counts only if its target lies inside ``output_dir``.
    """
    if not output_dir.is_dir():
        raise UsageError(f"output directory {output_dir} does not exist; check the job's outputs setting")
    root = output_dir.resolve()
    compiled = [_pattern_parts(p) for p in patterns]
    selected = [
        rel
        for rel in sorted(_files_under(root))
        if not compiled or any(_matches(parts, rel.split("/")) for parts in compiled)
    ]
    return _hash_files([(root / rel, rel) for rel in selected], workers)
