"""The one table of readers: which file each format's reader takes, what it yields, and within what limits.

Every output file, and every member of an archive, goes through this table (as repo2docker's buildpacks
do): each row's ``detect`` looks at the file's name, place or first bytes, rows are tried in order, and
the first that recognises the file reads it. Neither hashing nor comparison asks which format a file was
anywhere else: hashing records what the row's ``plan`` made of it, comparison reads the same names back
through the row's ``load``. A file no row recognises is compared by its bytes.

The next format is one new reader module (a ``detect``, a ``plan`` and a ``load``) and one row here.
Its plan also says which bytes it read (``_layout``): a ``Layout`` of content and framing, or, for a
reader that parses the whole file or fails, ``parses_whole_file`` in its row. One that says neither
cannot say which bytes it read, and a byte difference in its files is never excused as container bytes.
Order matters where recognitions overlap: logging tools' files are known by name and place before any
suffix is; a PT2 archive, and a torch zip that holds TorchScript's code, are read as such before a torch
zip is; a torch ``.pth.tar`` is a torch file before a ``.tar`` is an archive; a zip or tar that is no
other format's container is an archive, read member by member through this same table (``_archives``);
a ``.tar.gz`` is a tar before a gzip stream is a compressed file, the one member it holds read likewise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reprobox.errors import UsageError
from reprobox.guest.hashing import (
    _archives,
    _compressed,
    _dcp,
    _dcp_assembled,
    _dcp_shards,
    _formats,
    _hdf5,
    _load,
    _logformats,
    _numpy_files,
    _pt2,
    _safetensors,
    _sniff,
    _sqlite,
    _text,
    _textbounds,
    _torch_archive_read,
    _torchscript,
    _ubjson,
)
from reprobox.guest.hashing._arrays import _Content, _opaque
from reprobox.guest.hashing._bounds import MAX_EXPANSION_RATIO, OverLimit, cpu_budget, limit_reason, size_text
from reprobox.guest.hashing._layout import Layout
from reprobox.guest.hashing._load import Loaded


@dataclass(frozen=True)
class Reader:
    """One format: what recognises its files, how hashing reads them, how comparison reads them back."""

    format: str  # recorded as the checkpoint's ``format``
    what: str  # the format in words
    yields: str  # what it names: tensors, values, or both
    detect: Callable[[Path], bool]  # from the file's name, place or first bytes (a zip's directory at most)
    plan: Callable[[Path], _Content]  # for hashing: the tensors to hash and the digests of the values
    load: Callable[[Path], Loaded]  # for comparison: the same names, with their tensors and values
    bounds: str  # the limits it holds a file to (``_bounds``), in words
    # its plan parses the file from its first byte to its last, or fails: every byte is accounted for
    # (``_layout``). A reader that parses less states its ``Layout`` in its plan; one that does neither
    # cannot say which bytes it read, and a difference in its files' bytes is never excused.
    parses_whole_file: bool = False


def _values_loader(read: Callable[[Path], list[tuple[str, object]]]) -> Callable[[Path], Loaded]:
    """A loader for a format of values alone (structured text, logging tools' files)."""

    def load(path: Path) -> Loaded:
        try:
            return {}, _load._unique(read(path))
        except OverLimit:
            raise
        except (ValueError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path} cannot be read as values ({limit_reason(exc)})") from None

    return load


_TEXT_SUFFIXES = {
    kind: frozenset(suffix for suffix, named in _text.TEXT_FORMATS.items() if named == kind)
    for kind in set(_text.TEXT_FORMATS.values())
}


_TEXT_BOUNDS = (
    f"at most {_text.MAX_TEXT_BYTES >> 20} MiB; nesting as every reader; "
    f"{_textbounds.MAX_TEXT_VALUES:,} entries, counted as they are read; YAML at most "
    f"{_text.MAX_YAML_TEXT_BYTES >> 20} MiB"
)


def _text_row(kind: str, what: str) -> Reader:
    return Reader(
        format=kind,
        what=what,
        yields="values by dotted name",
        detect=lambda path: _sniff.suffix(path) in _TEXT_SUFFIXES[kind],
        plan=_text.plan_text,
        load=_values_loader(_text.read_values),
        bounds=_TEXT_BOUNDS,
        parses_whole_file=True,
    )


def _log_row(kind: str) -> Reader:
    what, _name, read = _logformats.LOG_FORMATS[kind]
    return Reader(
        format=kind,
        what=what,
        yields="values by tag and step",
        detect=lambda path: _sniff.memo(path, "log format", _logformats.log_format_of) == kind,
        plan=_logformats.plan_log,
        load=_values_loader(read),
        bounds="a size cap per tool; value count; checksums where the format has them",
        parses_whole_file=True,  # every record's framing checked, every record read and named or left out
    )


def _is_npz(path: Path) -> bool:
    return path.suffix.lower() == ".npz"


READERS: tuple[Reader, ...] = (
    _log_row("tensorboard"),
    _log_row("wandb"),
    _log_row("mlflow"),
    _text_row("json", "JSON file"),
    _text_row("jsonl", "JSON Lines file"),
    _text_row("yaml", "YAML file"),
    _text_row("csv", "CSV file"),
    _text_row("tsv", "tab-separated table (CatBoost's time_left.tsv, learn_error.tsv)"),
    Reader(
        format="sqlite",
        what="SQLite database (Optuna's study.db, MLflow's mlflow.db)",
        yields="values by table, row key and column; the schema's SQL",
        detect=_sqlite.is_sqlite,
        plan=_sqlite.plan_sqlite,
        load=_values_loader(_sqlite.read_sqlite),
        bounds=(
            f"at most {_sqlite.MAX_SQLITE_BYTES >> 20} MiB, the header checked first; opened read-only and "
            f"immutable, no memory map, no extensions; SQLite's limits lowered; {_sqlite.READ_SECONDS:g} s "
            "of CPU time; quick_check before any row is read"
        ),
    ),
    Reader(
        format="dcp",
        what="torch Distributed Checkpoint index (.metadata beside .distcp shards)",
        yields="per tensor: dtype, size and the digest of the tensor assembled from its chunks; the chunk "
        "layout under layout.; the save's fields (storage_meta.save_id) as values",
        detect=_dcp.is_index,
        plan=_dcp_assembled.plan_index,
        load=_dcp_assembled.load_index,
        bounds=_dcp.BOUNDS,
    ),
    Reader(
        format="dcp",
        what="torch Distributed Checkpoint shard (.distcp)",
        yields="each item's tensor as <fqn>@<chunk offsets>, each other item's value by its fqn",
        detect=_dcp_shards.is_shard,
        plan=_dcp_shards.plan_shard,
        load=_dcp_shards.load_shard,
        bounds=_dcp.BOUNDS + "; each item read as a torch.save file",
    ),
    Reader(
        format="safetensors",
        yields="tensors; its metadata as values",
        what="safetensors file",
        detect=lambda path: _sniff.suffix(path) == ".safetensors",
        plan=_safetensors.plan_safetensors,
        load=_load._load_safetensors_tensors,
        bounds="header size and nesting; every shape and offset checked against the file",
    ),
    Reader(
        format="numpy",
        yields="tensors",
        what="NumPy .npy or .npz file",
        detect=lambda path: _sniff.suffix(path) in (".npy", ".npz"),
        plan=lambda path: _numpy_files.plan_npz(path) if _is_npz(path) else _numpy_files.plan_npy(path),
        load=_load._load_numpy_tensors,
        bounds="no Python objects; shapes; zip members and expansion; arrays held in memory",
    ),
    Reader(
        format="hdf5",
        yields="datasets as tensors by path; attributes and links as values",
        what="HDF5 file (h5py, Keras weights)",
        detect=_hdf5.is_hdf5,
        plan=_hdf5.plan_hdf5,
        load=_hdf5.load_hdf5,
        bounds=_hdf5.BOUNDS,
    ),
    Reader(
        format="ubjson",
        yields="values by dotted name; arrays of one numeric type as tensors",
        what="UBJSON document (XGBoost's .ubj, a booster's raw bytes in a skops file)",
        detect=_ubjson.is_ubjson,
        plan=_ubjson.plan_ubjson,
        load=_ubjson.load_ubjson,
        bounds=_ubjson.BOUNDS,
    ),
    Reader(
        format="pt2",
        what="torch.export PT2 archive (torch.export.save, package_pt2)",
        yields="weights and constants by FQN; the exported program, configs and sample inputs as values",
        detect=_pt2.is_pt2,
        plan=_torch_archive_read.planner(_pt2.read_pt2, "PT2"),
        load=_torch_archive_read.loader(_pt2.read_pt2, "PT2"),
        bounds=_pt2.BOUNDS,
    ),
    Reader(
        format="torchscript",
        what="TorchScript archive (torch.jit.save)",
        yields="the module's tensors and values by name; constants; code and debug info as values",
        detect=_torchscript.is_torchscript_file,
        plan=_torch_archive_read.planner(_torchscript.read_torchscript, "TorchScript"),
        load=_torch_archive_read.loader(_torchscript.read_torchscript, "TorchScript"),
        bounds=_torchscript.BOUNDS,
    ),
    Reader(
        format="torch",
        yields="tensors and values",
        what="torch.save file",
        detect=_formats.is_torch_file,
        plan=_formats._plan_torch,
        load=_load._load_torch_tensors,
        bounds="zip members; the safe pickle reader's nesting, expansion and storage bounds",
    ),
    Reader(
        format="pickle",
        yields="tensors and values",
        what="pickle",
        detect=_formats.is_pickle_file,
        plan=_formats._plan_pickle,
        load=lambda path: _load._load_pickled_tensors(path, None),
        bounds="nothing imported or run; nesting, expansion and storage bounds",
    ),
    Reader(
        format="zip",
        yields="each member's tensors and values, under its name",
        what="zip archive",
        detect=_archives.is_zip_archive,
        plan=lambda path: _archives.plan_archive(path, MEMBERS),
        load=lambda path: _archives.load_archive(path, MEMBERS),
        bounds="member count, member and total sizes, expansion ratio, nesting of archives",
    ),
    Reader(
        format="tar",
        yields="each member's tensors and values, under its name",
        what="tar archive (plain, gzip, bzip2 or xz)",
        detect=_archives.is_tar_archive,
        plan=lambda path: _archives.plan_archive(path, MEMBERS),
        load=lambda path: _archives.load_archive(path, MEMBERS),
        bounds="member count, member and total sizes, expansion ratio, nesting of archives",
    ),
    Reader(
        format="compressed",
        yields="what the file it holds yields, under that file's name",
        what="gzip, bzip2 or xz compressed file (read as the file it holds)",
        detect=_compressed.is_compressed,
        plan=lambda path: _archives.plan_archive(path, MEMBERS),
        load=lambda path: _archives.load_archive(path, MEMBERS),
        bounds=(
            f"decompressed at most {MAX_EXPANSION_RATIO} times the file and "
            f"{size_text(_compressed.MAX_DECOMPRESSED_BYTES)}, counted as it decompresses; "
            "nesting of archives"
        ),
    ),
    Reader(
        format="json",
        what="JSON document without a suffix",
        yields="values by dotted name",
        detect=_text.is_bare_json,
        plan=_text.plan_bare_json,
        load=_values_loader(_text.read_bare_json),
        bounds=_TEXT_BOUNDS,
        parses_whole_file=True,
    ),
)


def reader_for(path: Path) -> Reader | None:
    """The first reader whose ``detect`` recognises the file, or None (it is compared by its bytes)."""
    with _sniff.session():
        return next((reader for reader in READERS if reader.detect(path)), None)


def format_of(path: Path) -> str:
    """The format a file is read as (``"file"`` when no reader recognises it)."""
    reader = reader_for(path)
    return "file" if reader is None else reader.format


def plan(path: Path) -> _Content:
    """What hashing makes of the file: its reader's plan, or its bytes."""
    reader = reader_for(path)
    if reader is None:
        return _opaque(None)
    try:
        with cpu_budget():
            content = reader.plan(path)
    except OverLimit as exc:  # the budget, met wherever the reader was: the file is refused, as by any limit
        return _opaque(f"content not hashed: {exc}; the content hash is the file sha256", str(exc))
    if reader.parses_whole_file and content.format != "file" and content.layout is None:
        return dataclasses.replace(content, layout=Layout.whole(path.stat().st_size))
    return content


def load(path: Path) -> Loaded:
    """Tensors and values for comparison, from the reader that hashed the file ({} and {} for bytes)."""
    reader = reader_for(path)
    return ({}, {}) if reader is None else reader.load(path)


def _load_member(path: Path) -> Loaded | None:
    reader = reader_for(path)
    return None if reader is None else reader.load(path)


MEMBERS: _archives.MemberReaders = _archives.MemberReaders(plan=plan, load=_load_member)
"""The table as archives read their members with it."""


def load_tensors(path: Path) -> Loaded:
    """The tensors (read when looked up, ``LazyTensors``) and plain values, named as hashing names them,
    from the reader that hashed the file: archive members too, values files' values too.

    A name that occurs twice gets ``#2``, ``#3`` ... appended in saved order. A file that cannot be read
    within the readers' limits (``_bounds``) raises UsageError naming the file and the limit, never a
    MemoryError, RecursionError or OverflowError; one changed since it was listed raises ``FileChanged``
    when a tensor is looked up.
    """
    try:
        return load(path)
    except (OverLimit, RecursionError, MemoryError, OverflowError) as exc:
        raise UsageError(
            f"{path} cannot be read safely ({limit_reason(exc)}), so its tensors are not loaded"
        ) from None


def load_values(path: Path) -> dict[str, object]:
    """The file's plain values by name, as its reader named their digests (comparison's read-back);
    UsageError when they cannot be read within the readers' limits."""
    return load_tensors(path)[1]
