"""SQLite databases read as their rows: Optuna's ``study.db`` and MLflow's ``mlflow.db`` compared value by
value, whatever their page layout, and hostile files refused within bounds in one sentence.

The databases are written here with the sqlite3 module in the shapes Optuna's and MLflow's SQLAlchemy
schemas create (their tables, keys and an AUTOINCREMENT counter), so no tracking library is needed.
"""

from __future__ import annotations

import contextlib
import sqlite3
import struct
import time
from pathlib import Path

import pytest

from reprobox import compare
from reprobox.errors import UsageError
from reprobox.guest.hashing import _sqlite, format_of, hash_checkpoint, load_tensors, load_values
from tests.unit.test_archives import make_run

OPTUNA_SCHEMA = """
CREATE TABLE studies (study_id INTEGER NOT NULL, study_name VARCHAR(512) NOT NULL, PRIMARY KEY (study_id));
CREATE TABLE trials (trial_id INTEGER NOT NULL, number INTEGER, study_id INTEGER, state VARCHAR(8) NOT NULL,
    datetime_start DATETIME, datetime_complete DATETIME, PRIMARY KEY (trial_id),
    FOREIGN KEY(study_id) REFERENCES studies (study_id));
CREATE INDEX ix_trials_study_id ON trials (study_id);
CREATE TABLE trial_params (param_id INTEGER NOT NULL, trial_id INTEGER, param_name VARCHAR(512),
    param_value FLOAT, distribution_json TEXT, PRIMARY KEY (param_id), UNIQUE (trial_id, param_name));
CREATE TABLE trial_values (trial_value_id INTEGER NOT NULL, trial_id INTEGER NOT NULL,
    objective INTEGER NOT NULL, value FLOAT, value_type VARCHAR(7) NOT NULL, PRIMARY KEY (trial_value_id));
CREATE TABLE trial_system_attributes (trial_system_attribute_id INTEGER NOT NULL, trial_id INTEGER,
    "key" VARCHAR(512), value_json TEXT, PRIMARY KEY (trial_system_attribute_id));
CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL,
    CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num));
CREATE TABLE notes (body TEXT, attachment BLOB);
"""

DISTRIBUTION = '{"name": "FloatDistribution", "attributes": {"log": true, "low": 1e-05, "high": 0.1}}'


def optuna_db(path: Path, *, lr: float = 0.01, churn: bool = False, vacuum: bool = False) -> Path:
    """An Optuna-shaped study of five trials; ``churn`` inserts and deletes rows first (free pages, other
    splits), ``vacuum`` packs the file afterwards: the rows are the same."""
    db = sqlite3.connect(path)
    db.executescript(OPTUNA_SCHEMA)
    db.execute("INSERT INTO studies VALUES (1, 'lr-search')")
    db.execute("INSERT INTO alembic_version VALUES ('v3.2.0.a')")
    if churn:
        db.executemany(
            "INSERT INTO trial_system_attributes VALUES (?, 1, ?, ?)",
            [(100 + i, f"k{i}", "x" * 400) for i in range(200)],
        )
        db.executemany("INSERT INTO notes VALUES (?, NULL)", [(f"draft {i}",) for i in range(50)])
        db.commit()
    for trial in range(5):
        db.execute(
            "INSERT INTO trials VALUES (?, ?, 1, 'COMPLETE', ?, '2026-11-28 03:00:09')",
            (trial + 1, trial, f"2026-11-28 03:00:0{trial}"),
        )
        value = lr if trial == 2 else 0.001 * (trial + 1)
        db.execute(
            "INSERT INTO trial_params VALUES (?, ?, 'lr', ?, ?)", (trial + 1, trial + 1, value, DISTRIBUTION)
        )
        db.execute(
            "INSERT INTO trial_values VALUES (?, ?, 0, ?, 'FINITE')", (trial + 1, trial + 1, 1 / (trial + 1))
        )
    db.execute("INSERT INTO notes VALUES ('best so far', ?)", (bytes(range(256)) * 8,))
    db.execute("INSERT INTO notes VALUES ('second', NULL)")
    db.commit()
    if churn:  # the notes left hold rowids 51 and 52, until VACUUM numbers them 1 and 2
        db.execute("DELETE FROM trial_system_attributes")
        db.execute("DELETE FROM notes WHERE body LIKE 'draft%'")
        db.commit()
    if vacuum:
        db.execute("VACUUM")
    db.close()
    return path


def mlflow_db(path: Path, *, loss: float = 0.25) -> Path:
    """An MLflow-shaped tracking store: an AUTOINCREMENT experiment id, a run, its params and metrics."""
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE experiments (experiment_id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
            name VARCHAR(256) NOT NULL UNIQUE, artifact_location VARCHAR(256), lifecycle_stage VARCHAR(32));
        CREATE TABLE runs (run_uuid VARCHAR(32) NOT NULL, name VARCHAR(250), status VARCHAR(9),
            start_time BIGINT, experiment_id INTEGER, CONSTRAINT run_pk PRIMARY KEY (run_uuid));
        CREATE TABLE params ("key" VARCHAR(250) NOT NULL, value VARCHAR(8000) NOT NULL, run_uuid VARCHAR(32)
            NOT NULL, CONSTRAINT param_pk PRIMARY KEY ("key", run_uuid));
        CREATE TABLE metrics ("key" VARCHAR(250) NOT NULL, value FLOAT NOT NULL, timestamp BIGINT NOT NULL,
            run_uuid VARCHAR(32) NOT NULL, step BIGINT DEFAULT '0' NOT NULL,
            is_nan BOOLEAN DEFAULT '0' NOT NULL,
            CONSTRAINT metric_pk PRIMARY KEY ("key", timestamp, step, run_uuid, value, is_nan));
        CREATE TABLE latest_metrics ("key" VARCHAR(250) NOT NULL, value FLOAT NOT NULL, timestamp BIGINT,
            step BIGINT NOT NULL, is_nan BOOLEAN NOT NULL, run_uuid VARCHAR(32) NOT NULL,
            CONSTRAINT latest_metric_pk PRIMARY KEY ("key", run_uuid));
        """
    )
    db.execute("INSERT INTO experiments (name, lifecycle_stage) VALUES ('Default', 'active')")
    run = "0123456789abcdef0123456789abcdef"
    db.execute("INSERT INTO runs VALUES (?, 'run', 'FINISHED', 1795836268683, 1)", (run,))
    db.execute("INSERT INTO params VALUES ('lr', '0.01', ?)", (run,))
    for step, value in enumerate([0.5, loss]):
        db.execute(
            "INSERT INTO metrics VALUES ('loss', ?, ?, ?, ?, 0)", (value, 1795836268700 + step, run, step)
        )
    db.execute("INSERT INTO latest_metrics VALUES ('loss', ?, 1795836268701, 1, 0, ?)", (loss, run))
    db.commit()
    db.close()
    return path


def test_an_optuna_study_is_read_as_rows_keyed_by_table_and_primary_key(tmp_path: Path) -> None:
    path = optuna_db(tmp_path / "study.db")
    assert format_of(path) == "sqlite"
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert (digest.format, digest.reader, digest.note) == ("sqlite", _sqlite.READER_NAME, None)
    assert not digest.tensors and digest.content_sha256 == digest.metadata_sha256
    values = load_values(path)
    assert set(values) == set(digest.metadata)
    assert values["trial_params/param_id=3/param_value"] == 0.01
    assert values["trial_params/param_id=3/distribution_json"] == DISTRIBUTION
    assert values["trials/trial_id=1/datetime_start"] == "2026-11-28 03:00:00"
    assert values["alembic_version/version_num=v3.2.0.a/version_num"] == "v3.2.0.a"
    assert (
        values["sqlite_schema/index/ix_trials_study_id"]
        == "CREATE INDEX ix_trials_study_id ON trials (study_id)"
    )
    # a table with no declared key: its rows by their place in rowid order, and the name says so
    assert values["notes/row=1/body"] == "best so far"
    assert values["notes/row=2/body"] == "second"
    assert values["notes/row=1/attachment"] == {"sha256": _sha256(bytes(range(256)) * 8), "bytes": 2048}
    assert values["sqlite_header/user_version"] == 0
    assert sum(name.startswith("trial_values/") for name in values) == 5 * 5
    assert load_tensors(path)[0] == {}


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_equal_rows_in_other_page_layouts_compare_equal(tmp_path: Path) -> None:
    plain = optuna_db(tmp_path / "plain.db")
    churned = optuna_db(tmp_path / "churned.db", churn=True)
    packed = optuna_db(tmp_path / "packed.db", churn=True, vacuum=True)
    sizes = {p.stat().st_size for p in (plain, churned, packed)}
    assert len(sizes) > 1  # the free pages the deleted rows left
    digests = [hash_checkpoint(p, relative_to=tmp_path) for p in (plain, churned, packed)]
    assert len({d.file_sha256 for d in digests}) == 3
    assert len({d.content_sha256 for d in digests}) == 1
    for written, numbers in ((churned, [(51,), (52,)]), (packed, [(1,), (2,)])):
        with contextlib.closing(sqlite3.connect(written)) as db:
            assert db.execute("SELECT rowid FROM notes").fetchall() == numbers
    a = make_run(tmp_path, "20261128T030000Z-aaaaaa", {"study.db": plain.read_bytes()})
    b = make_run(tmp_path, "20261128T030100Z-bbbbbb", {"study.db": churned.read_bytes()})
    result = compare.compare_runs([a, b])
    assert result.grade == compare.REPRODUCED and not result.value_differences, result.sentence


def test_a_differing_param_is_named_by_table_key_and_column(tmp_path: Path) -> None:
    a = make_run(
        tmp_path, "20261128T030000Z-aaaaaa", {"study.db": optuna_db(tmp_path / "a.db", lr=0.01).read_bytes()}
    )
    b = make_run(
        tmp_path, "20261128T030100Z-bbbbbb", {"study.db": optuna_db(tmp_path / "b.db", lr=0.02).read_bytes()}
    )
    result = compare.compare_runs([a, b])
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert [(e["checkpoint"], e["name"], e["a"], e["b"]) for e in result.value_differences] == [
        ("study.db", "trial_params/param_id=3/param_value", 0.01, 0.02)
    ]


def test_an_mlflow_store_names_its_metrics_and_keeps_its_autoincrement_counter(tmp_path: Path) -> None:
    values = load_values(mlflow_db(tmp_path / "mlflow.db"))
    run = "0123456789abcdef0123456789abcdef"
    assert values[f"latest_metrics/key=loss,run_uuid={run}/value"] == 0.25
    assert values[f"params/key=lr,run_uuid={run}/value"] == "0.01"
    assert values["sqlite_sequence/name=experiments/seq"] == 1  # the next id the store gives
    other = load_values(mlflow_db(tmp_path / "other.db", loss=0.125))
    differing = sorted(name for name in set(values) | set(other) if values.get(name) != other.get(name))
    assert f"latest_metrics/key=loss,run_uuid={run}/value" in differing
    assert all(name.startswith(("metrics/", "latest_metrics/")) for name in differing), differing


def test_a_differing_metric_is_shown_with_both_values_though_its_row_key_names_a_key(tmp_path: Path) -> None:
    a = make_run(
        tmp_path,
        "20261128T030000Z-aaaaaa",
        {"mlflow.db": mlflow_db(tmp_path / "a.db", loss=0.25).read_bytes()},
    )
    b = make_run(
        tmp_path,
        "20261128T030100Z-bbbbbb",
        {"mlflow.db": mlflow_db(tmp_path / "b.db", loss=0.125).read_bytes()},
    )
    result = compare.compare_runs([a, b])
    assert result.grade == compare.NOT_REPRODUCIBLE
    run = "0123456789abcdef0123456789abcdef"
    latest = {e["name"]: (e["a"], e["b"]) for e in result.value_differences}
    assert latest[f"latest_metrics/key=loss,run_uuid={run}/value"] == (0.25, 0.125)  # "key" is the row's
    # a value whose own name looks like a secret's stays hidden: the column MLflow names "key"
    gone = f"metrics/key=loss,timestamp=1795836268701,step=1,run_uuid={run},value=0.25,is_nan=0/key"
    assert latest[gone] == ("<redacted>", "<redacted>")


def test_rows_a_key_does_not_keep_apart_are_named_by_their_values_not_their_place(tmp_path: Path) -> None:
    def write(path: Path, rows: list[tuple[object, int]]) -> Path:
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE tags (name TEXT PRIMARY KEY, value)")  # SQLite lets NULLs repeat here
        db.executemany("INSERT INTO tags VALUES (?, ?)", rows)
        db.commit()
        db.close()
        return path

    one = load_values(write(tmp_path / "one.db", [(None, 2), (None, 1), ("a", 3)]))
    two = load_values(write(tmp_path / "two.db", [("a", 3), (None, 1), (None, 2)]))
    assert one == two
    assert (one["tags/name=NULL/value"], one["tags/name=NULL#2/value"]) == (1, 2)


def test_views_and_triggers_are_their_sql_and_never_run(tmp_path: Path) -> None:
    path = tmp_path / "views.db"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE t (a INTEGER PRIMARY KEY, b, doubled AS (a * 2) STORED,
            huge AS (length(printf('%.*c', 100000000, 'x'))) VIRTUAL);
        INSERT INTO t (a, b) VALUES (1, 'x');
        CREATE VIEW forever AS
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c;
        CREATE TRIGGER again AFTER INSERT ON t BEGIN INSERT INTO t (b) VALUES (new.b); END;
        """
    )
    db.commit()
    db.close()
    started = time.process_time()
    values = load_values(path)
    assert time.process_time() - started < 2
    assert "WITH RECURSIVE" in values["sqlite_schema/view/forever"]
    assert values["sqlite_schema/trigger/again"].startswith("CREATE TRIGGER again")
    assert {k: v for k, v in values.items() if k.startswith("t/")} == {
        "t/a=1/a": 1,
        "t/a=1/b": "x",
        "t/a=1/doubled": 2,
    }


def _patched(path: Path, offset: int, fmt: str, *values: int) -> Path:
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, offset, *values)
    path.write_bytes(bytes(data))
    return path


def test_a_header_that_declares_more_pages_than_the_file_holds_is_refused(tmp_path: Path) -> None:
    path = _patched(optuna_db(tmp_path / "study.db"), 28, ">I", 2**31)
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.format == "file" and digest.content_sha256 == digest.file_sha256
    with pytest.raises(UsageError, match=r"study\.db is refused: its header declares 2147483648 pages"):
        hash_checkpoint(path, relative_to=tmp_path, strict=True)
    with pytest.raises(UsageError, match="cannot be read safely"):
        load_tensors(path)


def test_a_damaged_page_is_refused_in_one_sentence(tmp_path: Path) -> None:
    path = optuna_db(tmp_path / "study.db")
    data = bytearray(path.read_bytes())
    page = struct.unpack_from(">H", data, 16)[0]
    data[2 * page : 2 * page + 16] = b"\xff" * 16  # the b-tree header of the third page
    path.write_bytes(bytes(data))
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.format == "file" and digest.note is not None
    assert (
        "not a readable SQLite database file (SQLite says: database disk image is malformed)" in digest.note
    )
    with pytest.raises(UsageError, match=r"study\.db cannot be read as values \(SQLite says") as raised:
        load_values(path)
    assert "\n" not in str(raised.value)


def test_a_schema_past_sqlites_lowered_limits_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "wide.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (a)")
    db.execute("PRAGMA writable_schema = ON")  # as a hostile writer would: the schema's text rewritten
    db.execute(
        "UPDATE sqlite_master SET sql = ? WHERE name = 't'",
        ("CREATE TABLE t (a CHECK (" + "(" * 300 + "a" + ")" * 300 + "))",),
    )
    db.commit()
    db.close()
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.format == "file" and digest.note is not None and "malformed database schema" in digest.note


def test_size_and_cpu_time_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = optuna_db(tmp_path / "study.db")
    monkeypatch.setattr(_sqlite, "READ_SECONDS", 0.0)  # spent at once: SQLite's progress handler stops it
    with pytest.raises(
        UsageError, match=r"refused: reading it takes over 0 s of CPU time, the limit \(\d+ values"
    ):
        hash_checkpoint(
            path, relative_to=tmp_path, strict=True
        )  # between statements, too short to be stopped
    monkeypatch.setattr(_sqlite, "PROGRESS_STEPS", 1)  # at SQLite's first instruction
    with pytest.raises(UsageError, match=r"over 0 s of CPU time, the limit \(SQLite interrupted\)"):
        hash_checkpoint(path, relative_to=tmp_path, strict=True)
    monkeypatch.undo()
    monkeypatch.setattr(_sqlite, "MAX_SQLITE_BYTES", 4096)
    with pytest.raises(UsageError, match=r"refused: it holds .* over the limit of 4096 bytes"):
        hash_checkpoint(path, relative_to=tmp_path, strict=True)
    monkeypatch.undo()
    monkeypatch.setattr(_sqlite, "MAX_VALUES", 40)  # counted as the rows are read
    with pytest.raises(UsageError, match="refused: it holds more than the limit of 40 values"):
        hash_checkpoint(path, relative_to=tmp_path, strict=True)


def test_a_file_that_only_begins_like_a_database_is_compared_by_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "fake.db"
    path.write_bytes(_sqlite.SQLITE_MAGIC + b"\x00" * 40)
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.format == "file" and digest.note is not None and "100-byte header" in digest.note
