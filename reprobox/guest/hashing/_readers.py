"""The one table of readers: which file each format's reader takes, what it yields, and within what limits.

Every output file, and every member of an archive, goes through this table (as repo2docker's buildpacks
do): each row's ``detect`` looks at the file's name, place or first bytes, rows are tried in order, and
the first that recognises the file reads it. Neither hashing nor comparison asks which format a file was
anywhere else: hashing records what the row's ``plan`` made of it, comparison reads the same names back
through the row's ``load``. A file no row recognises is compared by its bytes.

A row names its functions and its bounds by module and name (``Named``), and a module is imported the
first time one of its names is used: choosing a file's reader imports only the recognisers (each light,
in its reader module or, for a reader heavy to import, in ``_sniff``), and hashing a torch file imports
the torch reader alone. The next format is one new reader module (a ``detect``, a ``plan`` and a
``load``) and one row here.
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
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox.errors import UsageError
from reprobox.guest.hashing import _logformats, _sniff
from reprobox.guest.hashing._arrays import _Content, _opaque
from reprobox.guest.hashing._bounds import OverLimit, cpu_budget, limit_reason
from reprobox.guest.hashing._layout import Layout
from reprobox.guest.hashing._named import Named

if TYPE_CHECKING:
    from reprobox.guest.hashing._archives import MemberReaders
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
    bounds: str | Named  # the limits it holds a file to (``_bounds``), in words, or its module's sentence
    # its plan parses the file from its first byte to its last, or fails: every byte is accounted for
    # (``_layout``). A reader that parses less states its ``Layout`` in its plan; one that does neither
    # cannot say which bytes it read, and a difference in its files' bytes is never excused.
    parses_whole_file: bool = False


_UNIQUE = Named("_load", "_unique")


def _values_loader(read: Callable[[Path], list[tuple[str, object]]]) -> Callable[[Path], Loaded]:
    """A loader for a format of values alone (structured text, logging tools' files)."""

    def load(path: Path) -> Loaded:
        try:
            return {}, _UNIQUE(read(path))
        except OverLimit:
            raise
        except (ValueError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path} cannot be read as values ({limit_reason(exc)})") from None

    return load


def _text_row(kind: str, what: str) -> Reader:
    return Reader(
        format=kind,
        what=what,
        yields="values by dotted name",
        detect=lambda path: _sniff.text_format(path) == kind,
        plan=Named("_text", "plan_text"),
        load=_values_loader(Named("_text", "read_values")),
        bounds=Named("_text", "BOUNDS"),
        parses_whole_file=True,
    )


def _log_row(kind: str) -> Reader:
    """The logging tools' files, recognised by name and place before any other row: every file meets
    these rows, so ``_logformats`` is imported with the table."""
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


def _may_be_ubjson(path: Path) -> bool:
    """A ``.ubj`` file, or one that opens a container as UBJSON does: only then is its parser imported."""
    if _sniff.suffix(path) not in (".ubj", ".ubjson") and _sniff.head(path)[:1] not in (b"{", b"["):
        return False
    return bool(Named("_ubjson", "is_ubjson")(path))


_PLAN_NPZ, _PLAN_NPY = Named("_numpy_files", "plan_npz"), Named("_numpy_files", "plan_npy")
_LOAD_PICKLED = Named("_load", "_load_pickled_tensors")


def _archive_row(format: str, what: str, yields: str, detect: Named, bounds: str | Named) -> Reader:
    """A row of a container read member by member: through this same table (``_members``)."""
    plan, load = Named("_archives", "plan_archive"), Named("_archives", "load_archive")
    return Reader(
        format=format,
        what=what,
        yields=yields,
        detect=detect,
        plan=lambda path: plan(path, _members()),
        load=lambda path: load(path, _members()),
        bounds=bounds,
    )


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
        detect=_sniff.is_sqlite,
        plan=Named("_sqlite", "plan_sqlite"),
        load=_values_loader(Named("_sqlite", "read_sqlite")),
        bounds=Named("_sqlite", "BOUNDS"),
    ),
    Reader(
        format="ocdbt",
        what="TensorStore OCDBT database (Orbax's checkpoints): manifest.ocdbt, and each d/<id> it reaches",
        yields="the latest keys: zarr arrays as tensors, the rest values; a data file nothing of its own",
        detect=_sniff.is_ocdbt,
        plan=Named("_ocdbt_rows", "plan_ocdbt"),
        load=Named("_ocdbt_rows", "load_ocdbt"),
        bounds=Named("_ocdbt_rows", "BOUNDS"),
    ),
    Reader(
        format="dcp",
        what="torch Distributed Checkpoint index (.metadata beside .distcp shards)",
        yields="per tensor: dtype, size and the digest of the tensor assembled from its chunks; the chunk "
        "layout under layout.; the save's fields (storage_meta.save_id) as values",
        detect=_sniff.is_dcp_index,
        plan=Named("_dcp_assembled", "plan_index"),
        load=Named("_dcp_assembled", "load_index"),
        bounds=Named("_dcp", "BOUNDS"),
    ),
    Reader(
        format="dcp",
        what="torch Distributed Checkpoint shard (.distcp)",
        yields="each item's tensor as <fqn>@<chunk offsets>, each other item's value by its fqn",
        detect=_sniff.is_dcp_shard,
        plan=Named("_dcp_shards", "plan_shard"),
        load=Named("_dcp_shards", "load_shard"),
        bounds=Named("_dcp_shards", "BOUNDS"),
    ),
    Reader(
        format="safetensors",
        yields="tensors; its metadata as values",
        what="safetensors file",
        detect=lambda path: _sniff.suffix(path) == ".safetensors",
        plan=Named("_safetensors", "plan_safetensors"),
        load=Named("_load", "_load_safetensors_tensors"),
        bounds="header size and nesting; every shape and offset checked against the file",
    ),
    Reader(
        format="numpy",
        yields="tensors",
        what="NumPy .npy or .npz file",
        detect=lambda path: _sniff.suffix(path) in (".npy", ".npz"),
        plan=lambda path: _PLAN_NPZ(path) if path.suffix.lower() == ".npz" else _PLAN_NPY(path),
        load=Named("_load", "_load_numpy_tensors"),
        bounds="no Python objects; shapes; zip members and expansion; arrays held in memory",
    ),
    Reader(
        format="hdf5",
        yields="datasets as tensors by path; attributes and links as values",
        what="HDF5 file (h5py, Keras weights)",
        detect=Named("_hdf5_bytes", "is_hdf5"),
        plan=Named("_hdf5", "plan_hdf5"),
        load=Named("_hdf5", "load_hdf5"),
        bounds=Named("_hdf5", "BOUNDS"),
    ),
    Reader(
        format="ubjson",
        yields="values by dotted name; arrays of one numeric type as tensors",
        what="UBJSON document (XGBoost's .ubj, a booster's raw bytes in a skops file)",
        detect=_may_be_ubjson,
        plan=Named("_ubjson", "plan_ubjson"),
        load=Named("_ubjson", "load_ubjson"),
        bounds=Named("_ubjson", "BOUNDS"),
    ),
    Reader(
        format="pt2",
        what="torch.export PT2 archive (torch.export.save, package_pt2)",
        yields="weights and constants by FQN; the exported program, configs and sample inputs as values",
        detect=_sniff.is_pt2,
        plan=Named("_pt2", "plan_pt2"),
        load=Named("_pt2", "load_pt2"),
        bounds=Named("_pt2", "BOUNDS"),
    ),
    Reader(
        format="torchscript",
        what="TorchScript archive (torch.jit.save)",
        yields="the module's tensors and values by name; constants; code and debug info as values",
        detect=_sniff.is_torchscript,
        plan=Named("_torchscript", "plan_torchscript"),
        load=Named("_torchscript", "load_torchscript"),
        bounds=Named("_torchscript", "BOUNDS"),
    ),
    Reader(
        format="torch",
        yields="tensors and values",
        what="torch.save file",
        detect=_sniff.is_torch_file,
        plan=Named("_formats", "_plan_torch"),
        load=Named("_load", "_load_torch_tensors"),
        bounds="zip members; the safe pickle reader's nesting, expansion and storage bounds",
    ),
    Reader(
        format="pickle",
        yields="tensors and values",
        what="pickle",
        detect=_sniff.is_pickle_file,
        plan=Named("_formats", "_plan_pickle"),
        load=lambda path: _LOAD_PICKLED(path, None),
        bounds="nothing imported or run; nesting, expansion and storage bounds",
    ),
    _archive_row(
        "zip",
        "zip archive",
        "each member's tensors and values, under its name",
        Named("_archives", "is_zip_archive"),
        "member count, member and total sizes, expansion ratio, nesting of archives",
    ),
    _archive_row(
        "tar",
        "tar archive (plain, gzip, bzip2 or xz)",
        "each member's tensors and values, under its name",
        Named("_archives", "is_tar_archive"),
        "member count, member and total sizes, expansion ratio, nesting of archives",
    ),
    _archive_row(
        "compressed",
        "gzip, bzip2 or xz compressed file (read as the file it holds)",
        "what the file it holds yields, under that file's name",
        Named("_compressed", "is_compressed"),
        Named("_compressed", "BOUNDS"),
    ),
    Reader(
        format="json",
        what="JSON document without a suffix",
        yields="values by dotted name",
        detect=Named("_text", "is_bare_json"),
        plan=Named("_text", "plan_bare_json"),
        load=_values_loader(Named("_text", "read_bare_json")),
        bounds=Named("_text", "BOUNDS"),
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


@functools.cache
def _members() -> MemberReaders:
    """The table as archives read their members with it (made when the first archive is read)."""
    members: MemberReaders = Named("_archives", "MemberReaders")(plan, _load_member)
    return members


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
