"""Opening a store: migrations applied on open, once, even when several processes open it at once."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

import reversi
from reversi.core.models import EventType, Mode, NewEvent, RunRecord, Scope, utc_now
from reversi.errors import BadInput, StoreUnavailable
from reversi.store.factory import open_store
from reversi.store.schema import migrations

# The ledger's tables, column by column (later migrations may add tables, never take these away).
LEDGER_TABLES = {
    "schema_migrations": ["version"],
    "runs": ["run_id", "principal", "mode", "actor", "tenant", "environment", "labels", "created_at"],
    "steps": [
        "run_id",
        "step",
        "tool",
        "args",
        "depends_on",
        "compensation_needs_approval",
        "manifest_digest",
        "dup_key",
    ],
    "events": ["run_id", "seq", "step", "type", "at", "actor", "data", "approval_id"],
    "approvals": [
        "approval_id",
        "run_id",
        "step",
        "kind",
        "tool",
        "args",
        "call_key",
        "requested_by",
        "requested_at",
    ],
    "system_events": ["seq", "type", "at", "actor", "halt_id", "data"],
}


def query(db_url: str, sql: str, *, commit: bool = False) -> list[tuple[object, ...]]:
    """Run `sql` straight on the back end, bypassing Reversi."""
    if db_url.startswith("sqlite:///"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            rows = list(conn.execute(sql).fetchall())
            if commit:
                conn.commit()
            return rows
        finally:
            conn.close()
    with psycopg.connect(db_url, autocommit=True) as pg:
        cur = pg.execute(sql.encode())
        return list(cur.fetchall()) if cur.description else []


@contextmanager
def fresh_twin(db_url: str, tmp_path: Path) -> Iterator[str]:
    """Another empty store on the same back end."""
    if db_url.startswith("sqlite:///"):
        yield f"sqlite:///{tmp_path}/twin.db"
        return
    base, _, _ = db_url.partition("?")
    schema = f"t_{uuid.uuid4().hex}"
    query(db_url, f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{base}?options=-csearch_path%3D{schema}"
    finally:
        query(db_url, f'DROP SCHEMA "{schema}" CASCADE')


def tables(db_url: str) -> dict[str, list[str]]:
    if db_url.startswith("sqlite:///"):
        names = [r[0] for r in query(db_url, "SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {str(n): [str(c[1]) for c in query(db_url, f"PRAGMA table_info({n})")] for n in names}
    found: dict[str, list[str]] = {}
    rows = query(
        db_url,
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position",
    )
    for table, column in rows:
        found.setdefault(str(table), []).append(str(column))
    return found


def versions(db_url: str) -> list[int]:
    return [int(str(r[0])) for r in query(db_url, "SELECT version FROM schema_migrations ORDER BY version")]


def all_versions() -> list[int]:
    """Every migration's number (the same on both back ends: each has a file of every number)."""
    return [m.version for m in migrations("sqlite")]


def ledger_tables(found: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: [c for c in found.get(name, []) if c in columns] for name, columns in LEDGER_TABLES.items()}


def test_migrating_from_zero_gives_the_ledger_tables(db_url: str) -> None:
    assert tables(db_url) == {}

    open_store(db_url).close()

    assert ledger_tables(tables(db_url)) == LEDGER_TABLES


def test_opening_an_empty_store_applies_every_migration_in_order(db_url: str) -> None:
    numbered = all_versions()
    assert numbered == sorted(numbered) and numbered[0] == 1

    open_store(db_url).close()

    assert versions(db_url) == numbered


def test_reopening_a_store_applies_nothing_twice_and_keeps_its_runs(db_url: str) -> None:
    with reversi.open(db_url) as ledger:
        run = ledger.start_run(actor="billing-agent")
        run.begin("github.create_repo", {"name": "x"}).succeeded({"full_name": "acme/x"})

    for _ in range(3):
        with reversi.open(db_url) as again:
            assert [s.status.value for s in again.get_run(run.id).steps()] == ["succeeded"]

    assert versions(db_url) == all_versions()
    assert ledger_tables(tables(db_url)) == LEDGER_TABLES


def test_processes_opening_a_fresh_store_at_once_all_succeed_and_migrate_it_once(
    db_url: str, spawn: Callable[..., Any]
) -> None:
    children = [spawn("open") for _ in range(4)]
    for child in children:
        child.expect("ready")
    for child in children:
        child.send("go")

    for child in children:
        assert child.line() == "opened", child.said

    assert versions(db_url) == all_versions()
    assert ledger_tables(tables(db_url)) == LEDGER_TABLES


def test_the_embedded_store_runs_in_wal_mode(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/wal.db"
    open_store(url).close()

    assert query(url, "PRAGMA journal_mode") == [("wal",)]


def test_a_write_that_raises_leaves_nothing_behind(db_url: str) -> None:
    record = RunRecord("run_rolled-back", "local", Mode.OBSERVE, Scope(), {}, utc_now())
    with open_store(db_url) as store:
        def write_then_fail() -> None:
            with store.write() as q:
                q.insert_run(record)
                q.append(record.run_id, [NewEvent(EventType.RUN_OPENED, None, "local", {})])
                raise RuntimeError("the caller changed its mind")

        with pytest.raises(RuntimeError):
            write_then_fail()

        with store.read() as q:
            assert q.get_run(record.run_id) is None
            assert q.run_events(record.run_id) == []


def test_a_store_url_of_no_known_kind_is_bad_input() -> None:
    with pytest.raises(BadInput, match="unsupported store URL"):
        open_store("mysql://localhost/reversi")


def test_an_unreachable_postgresql_server_is_reported_as_unavailable() -> None:
    with pytest.raises(StoreUnavailable, match="cannot reach the store") as failed:
        open_store("postgresql://postgres:s3cret@127.0.0.1:1/test")
    assert "s3cret" not in failed.value.message, "the password must not leak into the message"
