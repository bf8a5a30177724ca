"""Which bytes of an SQLite database are accounted for: its pages once ``PRAGMA integrity_check`` finds
every byte of each in its place (so free pages that differ are slack, never a value), and nothing after
them or in a page no b-tree or freelist holds."""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

from reprobox import compare
from reprobox.guest.hashing import hash_checkpoint
from tests.unit.test_byte_accounting import assert_not_reproduced
from tests.unit.test_verdicts import two_runs

PAGE = 4096


def study(path: Path, *, deleted: str = "", secure_delete: bool = True) -> bytes:
    """A small table of three rows; ``deleted`` rows are written then deleted first (free pages hold them
    when ``secure_delete`` is off)."""
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA page_size={PAGE}")
    db.execute(f"PRAGMA secure_delete={'ON' if secure_delete else 'OFF'}")
    db.execute("CREATE TABLE trials (trial_id INTEGER PRIMARY KEY, value FLOAT, note TEXT)")
    if deleted:
        db.executemany("INSERT INTO trials VALUES (?, 0, ?)", [(100 + i, deleted * 300) for i in range(40)])
        db.commit()
        db.execute("DELETE FROM trials")
        db.commit()
    db.executemany("INSERT INTO trials VALUES (?, ?, 'ok')", [(i, i / 4) for i in range(3)])
    db.commit()
    db.close()
    return path.read_bytes()


def test_a_database_is_accounted_for_to_its_last_page(tmp_path: Path) -> None:
    data = study(tmp_path / "study.db", deleted="x", secure_delete=False)
    record = hash_checkpoint(tmp_path / "study.db", relative_to=tmp_path)
    assert record.unaccounted is not None and record.unaccounted.bytes == 0, record.unaccounted
    (pages,) = struct.unpack_from(">I", data, 28)
    assert pages * PAGE == len(data) and pages > 3  # the deleted rows left free pages


def test_free_pages_holding_other_deleted_rows_are_container_bytes(tmp_path: Path) -> None:
    def write(out: Path, run: int) -> None:
        study(out / "study.db", deleted="ab"[run], secure_delete=False)

    result = two_runs(tmp_path, write)
    assert result.grade == compare.REPRODUCED, result.sentence
    assert result.format_only == ["study.db"]


def test_bytes_appended_after_the_last_page_are_not_reproduced(tmp_path: Path) -> None:
    body = study(tmp_path / "body.db")

    def write(out: Path, run: int) -> None:
        (out / "study.db").write_bytes(body + f"SECOND PAYLOAD {run}".encode())

    result = two_runs(tmp_path, write)
    assert_not_reproduced(result, "study.db")
    assert result.value_differences[0]["a"].startswith(f"16 bytes at {len(body)}-{len(body) + 16} ")


def test_a_page_no_btree_or_freelist_holds_is_never_excused(tmp_path: Path) -> None:
    body = study(tmp_path / "body.db")
    (pages,) = struct.unpack_from(">I", body, 28)

    def write(out: Path, run: int) -> None:
        """One more page counted by the header, holding a payload no b-tree or freelist lists."""
        data = bytearray(body + (f"PAYLOAD {run} ".encode() * PAGE)[:PAGE])
        struct.pack_into(">I", data, 28, pages + 1)
        (out / "study.db").write_bytes(data)

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NO_VERDICT, result.sentence
    assert "study.db" not in result.format_only


def indexed(path: Path, patch: bytes) -> None:
    """A table whose index on ``note`` has its entry b'note-c' rewritten to ``patch`` (in order still,
    so only integrity_check, which compares the index with the table, finds it)."""
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA page_size={PAGE}")
    db.execute("CREATE TABLE trials (trial_id INTEGER PRIMARY KEY, note TEXT)")
    db.execute("CREATE INDEX ix_note ON trials (note)")
    db.executemany("INSERT INTO trials VALUES (?, ?)", [(1, "note-a"), (2, "note-c"), (3, "note-e")])
    db.commit()
    ((root,),) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'ix_note'").fetchall()
    db.close()
    data = bytearray(path.read_bytes())
    page = data[(root - 1) * PAGE : root * PAGE]
    at = (root - 1) * PAGE + page.index(b"note-c")
    data[at : at + len(patch)] = patch
    path.write_bytes(data)


def test_an_index_that_disagrees_with_its_table_leaves_the_bytes_unaccounted(tmp_path: Path) -> None:
    indexed(tmp_path / "study.db", b"note-b")
    record = hash_checkpoint(tmp_path / "study.db", relative_to=tmp_path)
    assert record.reader == "SQLite row reader" and record.unaccounted is None
    assert record.note is not None and "integrity_check finds" in record.note

    def write(out: Path, run: int) -> None:
        indexed(out / "study.db", [b"note-b", b"note-d"][run])

    result = two_runs(tmp_path, write)
    assert result.grade == compare.NO_VERDICT, result.sentence
    assert "study.db" not in result.format_only


def test_the_pages_counted_are_those_sqlite_counts(tmp_path: Path) -> None:
    body = study(tmp_path / "body.db")
    page = (b"PAYLOAD " * PAGE)[:PAGE]
    # the header's page count holds while its version-valid-for number equals the change counter: a
    # page after it is no page of the database
    (tmp_path / "counted.db").write_bytes(body + page)
    record = hash_checkpoint(tmp_path / "counted.db", relative_to=tmp_path)
    assert record.unaccounted is not None and record.unaccounted.ranges == ((len(body), len(body) + PAGE),)
    # otherwise SQLite counts the file's pages, a part of one as one: what is appended is a page never
    # used, and the file is refused
    for tail in (page, page[:100]):
        stale = bytearray(body + tail)
        struct.pack_into(">I", stale, 92, struct.unpack_from(">I", body, 24)[0] + 1)
        (tmp_path / "stale.db").write_bytes(stale)
        note = hash_checkpoint(tmp_path / "stale.db", relative_to=tmp_path).note
        assert note is not None and "never used" in note, note
