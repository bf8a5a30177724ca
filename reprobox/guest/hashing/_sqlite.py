"""SQLite databases (Optuna's ``study.db``, MLflow's ``mlflow.db``) read as their rows, not their pages.

Two runs that store the same trials write different files: pages split and merge in another order, a
deleted row leaves a free page, VACUUM packs them, the header counts every change. Those bytes are the
container; what is compared is the schema and every table's rows. Each value is named
``<table>/<key>/<column>``, the key being the row's declared primary key (``trials/trial_id=3/state``,
``alembic_version/version_num=v1/version_num``; ``a=1,b=x`` for a key of several columns) or, for a table
that declares none, its place in rowid order, and the name says so (``notes/row=2/text``): VACUUM
renumbers the rowids of such a table, so the rowid itself is the container's. Tables are read in name
order; a key seen twice (a damaged file, or NULLs in a key SQLite does not enforce) gets ``#2``, ``#3``
... in the order of the rows' values, so the layout never decides. A BLOB is its sha256 and length, as is
TEXT that is not UTF-8. Each schema entry (table, index, view, trigger) is one value, its SQL
(``sqlite_schema/table/trials``), and the header's application fields are two more
(``sqlite_header/user_version``, ``sqlite_header/application_id``). ``sqlite_sequence`` (AUTOINCREMENT
counters: the next ids the file will give) is read as a table keyed by its table names; the query
planner's statistics (``sqlite_stat1`` ... ``sqlite_stat4``, written by ANALYZE) are not values. Views and
triggers are their SQL, never run; a virtual table is its SQL, its rows read from the tables that hold
them; a column computed on read (``GENERATED ... VIRTUAL``) is its expression in the schema.

The file is untrusted. Before SQLite opens it: its size (``MAX_SQLITE_BYTES``) and its header (the magic,
a page size SQLite allows, no more pages declared than the file holds). It is opened read-only and
immutable (no lock, no journal, no ``-wal`` file read, nothing written), with no memory map (a file cut
short is a short read, not SIGBUS), the schema untrusted, cell sizes checked, extensions never loaded,
views and triggers disabled where Python can say so, SQLite's limits lowered (``LIMITS``), and a
progress handler that stops it past ``READ_SECONDS`` of CPU time (or the file's budget, ``_bounds``).
``PRAGMA quick_check`` runs first: a damaged file is refused rather than read for what survives.

Which bytes were read (``_layout``): after the rows, ``PRAGMA integrity_check`` (within the same CPU
budget) proves every page SQLite counts (``PRAGMA page_count``: the header's database size where its
version-valid-for number equals the change counter, else the file's size in pages, a part of one
counted as one) is a b-tree, overflow, freelist or pointer-map page (the lock-byte page, at 1 GiB, lies
past ``MAX_SQLITE_BYTES``), and every byte of each is header, cell pointers, cells, freeblocks or its
unallocated gap: the cells hold the values read, the rest is the format's framing and free space,
which by the format holds no value (a deleted row's leftovers are slack, like a zip's padding). Those
pages are accounted for; bytes after them (a payload appended) are not. If integrity_check finds
anything, or runs out of time, the file has no layout (no byte difference excused) and its note says
why.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reprobox.guest.hashing._arrays import _Content, _refused
from reprobox.guest.hashing._bounds import MAX_VALUES, OverLimit, check_cpu_budget, size_text
from reprobox.guest.hashing._canonical import _metadata_digests, canonical_json, canonical_value
from reprobox.guest.hashing._filebytes import FileIdentity, check_unchanged
from reprobox.guest.hashing._layout import Layout
from reprobox.guest.hashing._sniff import SQLITE_MAGIC

READER_NAME = "SQLite row reader"
HEADER_BYTES = 100

MAX_SQLITE_BYTES = 256 << 20
"""Larger databases are compared by their bytes: their rows would be more than ``MAX_VALUES`` values."""

READ_SECONDS = 5.0
"""SQLite stops past this much CPU time of the reading thread, at compare time too (where no file budget
is running); within hashing the file's own budget (``_bounds.FILE_CPU_SECONDS``) stops it first."""

BOUNDS = (
    f"at most {MAX_SQLITE_BYTES >> 20} MiB, the header checked first; opened read-only and immutable, no "
    f"memory map, no extensions; SQLite's limits lowered; {READ_SECONDS:g} s of CPU time; quick_check "
    "before any row is read"
)

MIN_SQLITE = (3, 31, 0)
"""``trusted_schema`` (3.31), ``pragma_table_xinfo`` (3.26) and ``immutable`` (3.11): older SQLite
libraries leave the database compared by its bytes, with a note saying why."""

PROGRESS_STEPS = 10_000
"""SQLite's virtual machine instructions between two looks at the clock."""

ROWS_PER_FETCH = 1024

LIMITS: dict[str, Any] = {
    "LENGTH": 64 << 20,  # one string or BLOB
    "SQL_LENGTH": 1 << 20,  # one schema entry's SQL
    "COLUMN": 2000,
    "EXPR_DEPTH": 100,
    "COMPOUND_SELECT": 50,
    "VDBE_OP": 250_000,
    "FUNCTION_ARG": 32,
    "ATTACHED": 0,
    "LIKE_PATTERN_LENGTH": 50,
    "VARIABLE_NUMBER": 8,
    "TRIGGER_DEPTH": 1,
    "WORKER_THREADS": 0,
}
"""SQLite's run-time limits (``sqlite3_limit``), lowered for a file nobody vouches for."""

DBCONFIG: dict[str, Any] = {
    "DEFENSIVE": True,
    "TRUSTED_SCHEMA": False,
    "ENABLE_TRIGGER": False,
    "ENABLE_VIEW": False,
    "ENABLE_LOAD_EXTENSION": False,
}
"""``sqlite3_db_config`` switches, set where Python has ``Connection.setconfig`` (3.12 and later)."""

PRAGMAS = ("trusted_schema=OFF", "cell_size_check=ON", "query_only=ON", "mmap_size=0", "cache_size=-16384")

PLANNER_TABLES = frozenset({"sqlite_stat1", "sqlite_stat2", "sqlite_stat3", "sqlite_stat4"})
KEYED_BY = {"sqlite_sequence": ("name",)}
"""Internal tables that declare no key, and the column that is one."""
SCHEMA_NAME, HEADER_NAME = "sqlite_schema", "sqlite_header"
_GENERATED_VIRTUAL = 2  # ``hidden`` in ``table_xinfo``: computed on read, not stored


def check_header(head: bytes, size: int) -> None:
    """Refuse a file SQLite should not be handed: too large, or a header that does not hold together."""
    if size > MAX_SQLITE_BYTES:
        raise OverLimit(f"it holds {size_text(size)}, over the limit of {size_text(MAX_SQLITE_BYTES)}")
    if len(head) < HEADER_BYTES or head[: len(SQLITE_MAGIC)] != SQLITE_MAGIC:
        raise ValueError(f"it is shorter than the {HEADER_BYTES}-byte header of an SQLite database")
    (raw_page,) = struct.unpack_from(">H", head, 16)
    page = 65536 if raw_page == 1 else raw_page
    if page < 512 or page & (page - 1):
        raise ValueError(f"its header declares pages of {raw_page} bytes, not a power of two from 512")
    change, pages = struct.unpack_from(">II", head, 24)
    (valid_for,) = struct.unpack_from(">I", head, 92)
    if valid_for == change and pages * page > size:  # SQLite trusts the count only when these agree
        raise OverLimit(f"its header declares {pages} pages of {page} bytes, more than its {size} bytes hold")


class _Budget:
    """The progress handler: 1 (interrupt) once the CPU time is spent, and why, for the sentence."""

    def __init__(self) -> None:
        self.deadline = time.thread_time() + READ_SECONDS
        self.spent: OverLimit | None = None

    def check(self, done: str) -> None:
        """OverLimit once the time is spent (between SQLite's statements, which may be too short for
        the handler to be called: one per table of a schema of many)."""
        check_cpu_budget(done)
        if time.thread_time() > self.deadline:
            raise OverLimit(f"reading it takes over {READ_SECONDS:g} s of CPU time, the limit ({done})")

    def tick(self) -> int:
        try:
            self.check("SQLite interrupted")
        except OverLimit as exc:
            self.spent = exc
            return 1
        return 0


def _text(raw: bytes) -> object:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return _digest("text (not UTF-8)", raw)


def _digest(kind: str, raw: bytes) -> dict[str, object]:
    return {kind: hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}


def _apply(connection: sqlite3.Connection, method: str, prefix: str, settings: dict[str, Any]) -> None:
    """Each setting through ``connection.<method>``, where this Python has the method and the constant
    (``setlimit`` from 3.11, ``setconfig`` from 3.12)."""
    setter = getattr(connection, method, None)
    for name, value in settings.items():
        option = getattr(sqlite3, prefix + name, None)
        if setter is not None and option is not None:
            setter(option, value)


@contextlib.contextmanager
def _opened(path: Path, budget: _Budget) -> Iterator[sqlite3.Connection]:
    uri = path.absolute().as_uri() + "?mode=ro&immutable=1"
    connection = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=True)
    try:
        connection.set_progress_handler(budget.tick, PROGRESS_STEPS)  # before the schema is first read
        _apply(connection, "setlimit", "SQLITE_LIMIT_", LIMITS)
        _apply(connection, "setconfig", "SQLITE_DBCONFIG_", DBCONFIG)
        connection.text_factory = _text
        for pragma in PRAGMAS:
            connection.execute(f"PRAGMA {pragma}")
        yield connection
    finally:
        connection.close()


def read_sqlite(path: Path) -> list[tuple[str, object]]:
    """The database's values as (name, value) pairs; ValueError (OverLimit for a limit) says why not."""
    return _read(path, account=False)[0]


def _read(path: Path, *, account: bool) -> tuple[list[tuple[str, object]], Layout | None, str | None]:
    """The values, and when ``account``: the layout integrity_check vouches for, or None and why not."""
    with path.open("rb") as f:
        identity = FileIdentity.of(f.fileno())
        head = f.read(HEADER_BYTES)
    check_header(head, identity.size)
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise ValueError(
            f"this Python's SQLite {sqlite3.sqlite_version} is older than "
            f"{'.'.join(map(str, MIN_SQLITE))}, which reading an untrusted database needs"
        )
    budget = _Budget()
    layout: Layout | None = None
    why_not: str | None = None
    try:
        with _opened(path, budget) as connection:
            pairs = _header_values(head) + _values_of(connection, budget)
            if account:
                layout, why_not = _pages_layout(connection, budget, identity.size)
    except sqlite3.Error as exc:
        if budget.spent is not None:
            raise budget.spent from None
        reason = f"SQLite says: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        if getattr(exc, "sqlite_errorname", "") in ("SQLITE_TOOBIG", "SQLITE_NOMEM"):
            raise OverLimit(f"{reason}, over its limits") from None
        raise ValueError(reason) from None
    check_unchanged(path, identity)  # immutable: SQLite took the file as it was; it still is
    return pairs, layout, why_not


def _pages_layout(
    connection: sqlite3.Connection, budget: _Budget, size: int
) -> tuple[Layout | None, str | None]:
    """The database's pages as accounted for once ``integrity_check`` finds each byte of each page in its
    place; bytes after the last page are left unaccounted. None, and why, when it finds anything."""
    try:
        found = [str(line) for (line,) in connection.execute("PRAGMA integrity_check(3)")]
    except sqlite3.Error:
        if budget.spent is None:
            raise
        reason, budget.spent = budget.spent, None
        return None, f"its bytes are not accounted for: integrity_check stopped ({reason})"
    if found != ["ok"]:
        damage = " ".join(" ".join(found).replace("*** in database main ***", "").split())
        return None, f"its bytes are not accounted for: SQLite's integrity_check finds {damage[:200]}"
    ((page_size,),) = connection.execute("PRAGMA page_size").fetchall()
    ((page_count,),) = connection.execute("PRAGMA page_count").fetchall()
    return Layout.of(size, [(0, min(size, int(page_size) * int(page_count)))]), None


def _header_values(head: bytes) -> list[tuple[str, object]]:
    (user_version,) = struct.unpack_from(">i", head, 60)
    (application_id,) = struct.unpack_from(">I", head, 68)
    return [(f"{HEADER_NAME}/user_version", user_version), (f"{HEADER_NAME}/application_id", application_id)]


def _values_of(connection: sqlite3.Connection, budget: _Budget) -> list[tuple[str, object]]:
    found = [str(line) for (line,) in connection.execute("PRAGMA quick_check(3)")]
    if found != ["ok"]:
        damage = " ".join(" ".join(found).replace("*** in database main ***", "").split())
        raise ValueError(f"SQLite's quick_check finds it damaged: {damage[:200]}")
    schema = sorted(
        ((str(kind), str(name), root if isinstance(root, int) else 0, sql) for kind, name, root, sql in
         connection.execute("SELECT type, name, rootpage, sql FROM sqlite_master")),
        key=lambda entry: entry[:3],
    )  # fmt: skip
    pairs: list[tuple[str, object]] = [(f"{SCHEMA_NAME}/{kind}/{name}", sql) for kind, name, _, sql in schema]
    if len(pairs) > MAX_VALUES:
        raise OverLimit(f"its schema lists more than the limit of {MAX_VALUES} entries")
    tables = sorted(name for kind, name, root, _ in schema if kind == "table" and root > 0)
    for table in tables:
        if table not in PLANNER_TABLES:
            budget.check(f"{len(pairs)} values read")
            _table_values(connection, table, pairs, budget)
    return pairs


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _table_values(
    connection: sqlite3.Connection, table: str, pairs: list[tuple[str, object]], budget: _Budget
) -> None:
    """Append each row's values, named by table, key and column."""
    info = connection.execute(
        "SELECT name, pk, hidden FROM pragma_table_xinfo(?, 'main')", (table,)
    ).fetchall()
    columns = [str(name) for name, _pk, hidden in info if hidden != _GENERATED_VIRTUAL]
    key = KEYED_BY.get(table) or tuple(str(n) for pk, n in sorted((pk, n) for n, pk, _ in info if pk > 0))
    listed = ", ".join(map(_quoted, columns))  # identifiers quoted: the file names them, nothing else
    cursor = connection.execute(f"SELECT {listed} FROM main.{_quoted(table)}")  # noqa: S608
    rows: dict[str, list[tuple[object, ...]]] = {}
    ordinal = 0
    while batch := cursor.fetchmany(ROWS_PER_FETCH):
        budget.check(f"{len(pairs)} values read")
        for row in batch:
            ordinal += 1
            if key:
                by_column = dict(zip(columns, row, strict=True))
                name = ",".join(f"{column}={_key_text(by_column.get(column))}" for column in key)
            else:  # a table scan is in rowid order, which VACUUM keeps (its numbers it does not)
                name = f"row={ordinal}"
            rows.setdefault(name, []).append(tuple(_value(v) for v in row))
        if len(pairs) + ordinal * len(columns) > MAX_VALUES:  # counted as they are read
            raise OverLimit(f"it holds more than the limit of {MAX_VALUES} values")
    for name, found in rows.items():
        if len(found) > 1:  # a key the file does not keep unique: the rows' values order them
            found.sort(key=canonical_json)
        for index, values in enumerate(found, start=1):
            row_name = name if index == 1 else f"{name}#{index}"
            pairs.extend((f"{table}/{row_name}/{c}", v) for c, v in zip(columns, values, strict=True))


def _value(value: object) -> object:
    return _digest("sha256", value) if isinstance(value, bytes) else value


def _key_text(value: object) -> str:
    if isinstance(value, bytes):
        return "x" + hashlib.sha256(value).hexdigest()[:16]
    if value is None:
        return "NULL"
    if isinstance(value, dict):  # TEXT that is not UTF-8
        return canonical_json(canonical_value(value))
    return str(value)


def plan_sqlite(path: Path) -> _Content:
    try:
        pairs, layout, why_not = _read(path, account=True)
    except (ValueError, MemoryError, RecursionError) as exc:
        return _refused("SQLite database", exc)
    metadata = _metadata_digests(pairs)
    return _Content(
        "sqlite", metadata=metadata, note=why_not, reader=READER_NAME, values_only=True, layout=layout
    )
