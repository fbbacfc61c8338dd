"""The schema: a fresh store (`schema.sql`) and one migrated from zero, or from any older version, end up
alike, table by table, column by column, index by index, as each back end describes itself; and the SQL
files keep their naming rules."""

from __future__ import annotations

import re
import sqlite3
from importlib import resources
from pathlib import Path

import psycopg
import pytest
from tests.store.test_migrations import fresh_twin, query, versions

from reversi.errors import SchemaFilesError
from reversi.store.factory import open_store
from reversi.store.schema import SHARED, Backend, Migration, migrations, pick, plan, statements

EVERY_VERSION = [m.version for m in migrations("sqlite")]


def migrate_by_hand(url: str, upto: int | None = None) -> None:
    """Apply migration 1, then each later one (up to `upto`), each in a transaction of its own that also
    records it, straight on the back end: a store as an older Reversi left it."""
    backend: Backend = "sqlite" if url.startswith("sqlite:///") else "postgresql"
    steps = [m for m in migrations(backend) if upto is None or m.version <= upto]
    todo = [["CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)"]]
    todo += [[*statements(m.script), f"INSERT INTO schema_migrations (version) VALUES ({m.version})"] for m in steps]
    if backend == "sqlite":
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            for batch in todo:
                conn.execute("BEGIN")
                for statement in batch:
                    conn.execute(statement)
                conn.execute("COMMIT")
        finally:
            conn.close()
        return
    with psycopg.connect(url, autocommit=True) as pg:
        for batch in todo:
            with pg.transaction():
                for statement in batch:
                    pg.execute(statement.encode())


def normal(sql: object) -> object:
    return re.sub(r"\s+", " ", sql).strip() if isinstance(sql, str) else sql


def schema_of(url: str) -> dict[str, object]:
    """Every table's columns (name, type, nullability, default, key), its foreign keys, and every index,
    as the back end reports them: sqlite_master and its pragmas, or information_schema and pg_catalog."""
    if url.startswith("sqlite:///"):
        tables = [str(r[0]) for r in query(url, "SELECT name FROM sqlite_master WHERE type = 'table' "
                                                "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {
            "columns": {t: [r[1:] for r in query(url, f"PRAGMA table_info({t})")] for t in tables},
            "foreign keys": {t: sorted(r[2:] for r in query(url, f"PRAGMA foreign_key_list({t})")) for t in tables},
            "indexes": {str(r[0]): (r[1], normal(r[2])) for r in query(
                url, "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index'")},
        }
    [(schema,)] = query(url, "SELECT current_schema()")
    columns: dict[str, list[tuple[object, ...]]] = {}
    for table, *column in query(
        url, "SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns "
             "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"):
        columns.setdefault(str(table), []).append(tuple(column))

    def local(sql: object) -> object:  # the test schemas' names differ: leave them out
        return normal(str(sql).replace(f'"{schema}".', "").replace(f"{schema}.", ""))

    return {
        "columns": columns,
        "constraints": sorted((r[0], r[1], local(r[2])) for r in query(
            url, "SELECT c.conname, t.relname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
                 "JOIN pg_class t ON t.oid = c.conrelid WHERE c.connamespace = current_schema()::regnamespace")),
        "indexes": {str(r[0]): (r[1], local(r[2])) for r in query(
            url, "SELECT indexname, tablename, indexdef FROM pg_indexes WHERE schemaname = current_schema()")},
    }


def test_a_fresh_store_and_one_migrated_from_zero_have_the_same_schema(db_url: str, tmp_path: Path) -> None:
    open_store(db_url).close()

    with fresh_twin(db_url, tmp_path) as from_zero:
        migrate_by_hand(from_zero)
        assert schema_of(db_url) == schema_of(from_zero)
        assert versions(db_url) == versions(from_zero) == EVERY_VERSION


@pytest.mark.parametrize("version", EVERY_VERSION)
def test_a_store_at_an_older_version_is_brought_to_the_schema_of_a_fresh_one(
    db_url: str, tmp_path: Path, version: int
) -> None:
    migrate_by_hand(db_url, upto=version)

    open_store(db_url).close()

    assert versions(db_url) == EVERY_VERSION
    with fresh_twin(db_url, tmp_path) as fresh:
        open_store(fresh).close()
        assert schema_of(db_url) == schema_of(fresh)
    [(made,)] = query(db_url, "SELECT count(*) FROM store_secrets")
    assert made == (1 if version < EVERY_VERSION[-1] else 0), "a store that migrated makes its secrets then"


def test_the_schema_the_comparison_sees_is_the_whole_ledger(db_url: str) -> None:
    open_store(db_url).close()

    found = schema_of(db_url)
    columns, indexes = found["columns"], found["indexes"]
    assert isinstance(columns, dict) and {"runs", "events", "approvals", "scope_jobs"} <= set(columns)
    assert isinstance(indexes, dict) and {"steps_dup_key", "approvals_call", "scope_jobs_state"} <= set(indexes)
    assert "call_key" in [column[0] for column in columns["approvals"]]


def test_a_fresh_store_gets_the_schema_script_then_only_the_migrations_it_does_not_hold() -> None:
    found = [Migration(n, f"{n:04d}_m.sql", f"script {n}") for n in (1, 2, 5)]

    assert plan(set(), (2, "schema"), found) == (["schema", "script 5"], [1, 2, 5])
    assert plan(set(), (5, "schema"), found) == (["schema"], [1, 2, 5])
    assert plan({1}, (5, "schema"), found) == (["script 2", "script 5"], [2, 5])
    assert plan({1, 2, 5}, (5, "schema"), found) == ([], [])


def test_a_version_written_per_back_end_gives_each_back_end_its_own_file() -> None:
    names = ["0001_a.sql", "0002_b.sqlite.sql", "0002_b.postgresql.sql", "__init__.py", "notes.txt"]

    assert pick(names, "sqlite") == [(1, "0001_a.sql"), (2, "0002_b.sqlite.sql")]
    assert pick(names, "postgresql") == [(1, "0001_a.sql"), (2, "0002_b.postgresql.sql")]


@pytest.mark.parametrize(("names", "message"), [
    (["0002_b.sqlite.sql"], "migration 0002 has a file for sqlite only"),
    (["0002_b.sql", "0002_b.postgresql.sql"], "migration 0002 has a shared file and a back end's"),
    (["0002_b.sql", "0002_c.sql"], "migration 0002 has two files"),
])
def test_a_version_whose_files_leave_a_back_end_out_or_disagree_is_refused(names: list[str], message: str) -> None:
    with pytest.raises(SchemaFilesError, match=message):
        pick(names, "sqlite")


def test_every_sql_file_written_for_both_back_ends_says_so_on_its_first_line() -> None:
    store = resources.files("reversi.store")
    shared = [store.joinpath("schema.sql")] + [
        f for f in store.joinpath("migrations").iterdir() if re.fullmatch(r"\d{4}_\w+\.sql", f.name)]
    assert len(shared) > 10
    assert [f.name for f in shared if f.read_text().splitlines()[0] != SHARED] == []
    # What SQLite takes and PostgreSQL does not (or the reverse) goes in a file named for its back end.
    for f in store.joinpath("migrations").iterdir():
        if f.name.endswith((".sqlite.sql", ".postgresql.sql")):
            assert f.read_text().splitlines()[0] != SHARED, f.name
