"""The sql connector on SQLite and PostgreSQL: plain functions, and runs rolled back by the real CLI."""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.conftest import PG_SKIP, PG_URL, _with_search_path
from tests.connectors.conftest import Done, compensation_calls, connectors_cli, reversi_cli

import reversi
from reversi.connectors import BadArgument, ChangedSince, sql

MANIFEST = sql.CONNECTOR.manifest_path()

SCHEMA = {
    "sqlite": [
        "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER, price NUMERIC, blob BLOB)",
        "CREATE TABLE tags (item_id INTEGER, tag TEXT, note TEXT, PRIMARY KEY (item_id, tag))",
        "CREATE TABLE log (line TEXT)",
    ],
    "postgres": [
        "CREATE TABLE items (id SERIAL PRIMARY KEY, name TEXT NOT NULL, qty INTEGER, price NUMERIC(8, 2),"
        " blob BYTEA, seen TIMESTAMPTZ)",
        'CREATE TABLE tags (item_id INTEGER, tag TEXT, note TEXT, "Odd ""name""" TEXT, PRIMARY KEY (item_id, tag))',
        "CREATE TABLE log (line TEXT)",
    ],
}
SEED = [
    "INSERT INTO items (id, name, qty, price) VALUES (1, 'apple', 5, 1.25), (2, 'pear', 3, 2.50), (3, 'fig', 9, 0.75)",
    "INSERT INTO tags (item_id, tag, note) VALUES (1, 'fruit', 'red'), (3, 'fruit', 'dried')",
]


class Target:
    """The database the agent acts on (configured as `shop`), read back as plain rows."""

    name = "shop"

    def __init__(self, kind: str, url: str) -> None:
        self.kind, self.url = kind, url

    def configure(self, monkeypatch: pytest.MonkeyPatch) -> Target:
        monkeypatch.setenv("REVERSI_SQL_DATABASES", f"{self.name}={self.url}")
        return self

    def execute(self, *statements: str) -> None:
        if self.kind == "sqlite":
            with sqlite3.connect(self.url.removeprefix("sqlite:///")) as conn:
                for statement in statements:
                    conn.execute(statement)
            return
        with psycopg.connect(self.url, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    def rows(self) -> dict[str, list[tuple[Any, ...]]]:
        query = {"items": "SELECT * FROM items ORDER BY id", "tags": "SELECT * FROM tags ORDER BY item_id, tag"}
        if self.kind == "sqlite":
            with sqlite3.connect(self.url.removeprefix("sqlite:///")) as conn:
                return {t: conn.execute(q).fetchall() for t, q in query.items()}
        with psycopg.connect(self.url) as conn:
            return {t: conn.execute(q).fetchall() for t, q in query.items()}


@contextmanager
def _postgres_shop(password: str = "") -> Iterator[Target]:
    """A schema of its own on the test server, with the shop's tables and rows."""
    if not PG_URL:
        pytest.skip(PG_SKIP)
    schema = f"shop_{uuid.uuid4().hex}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = PG_URL.replace("postgres@", f"postgres:{password}@", 1) if password else PG_URL
    found = Target("postgres", _with_search_path(url, schema))
    try:
        found.execute(*SCHEMA["postgres"], *SEED, "SELECT setval('items_id_seq', 100)")
        yield found
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Target]:
    if request.param == "sqlite":
        found = Target("sqlite", f"sqlite:///{tmp_path}/shop.db")
        found.execute(*SCHEMA["sqlite"], *SEED)
        yield found.configure(monkeypatch)
        return
    with _postgres_shop() as found:
        yield found.configure(monkeypatch)


def _agent_run(ledger: reversi.Ledger, db: str) -> str:
    run = ledger.start_run(actor="shop-agent")
    rows = [{"name": "kiwi", "qty": 1}, {"id": 40, "name": "plum", "qty": 2, "blob": {"$base64": "AP8="}}]
    run.call("sql.insert", {"db": db, "table": "items", "rows": rows}, sql.insert)
    run.call("sql.update", {"db": db, "table": "items", "key": {"id": 1}, "values": {"qty": 0, "price": 9.99}},
             sql.update)
    run.call("sql.delete", {"db": db, "table": "items", "key": {"id": 2}}, sql.delete)
    run.call("sql.update", {"db": db, "table": "tags", "key": {"item_id": 1, "tag": "fruit"}, "values": {"note": "x"}},
             sql.update)
    run.call("sql.insert", {"db": db, "table": "tags", "rows": [{"item_id": 2, "tag": "gone"}]}, sql.insert)
    run.call("sql.delete", {"db": db, "table": "tags", "key": {"item_id": 3, "tag": "fruit"}}, sql.delete)
    return run.id


def test_a_rollback_through_the_cli_puts_every_row_back(
    db_url: str, target: Target, rollback: Callable[..., Done]
) -> None:
    before = target.rows()
    with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
        run_id = _agent_run(ledger, target.name)
    assert target.rows() != before

    done = rollback(run_id, MANIFEST)

    assert done.code == 0, done.err + done.out
    assert done.json()["compensated"] == [5, 4, 3, 2, 1, 0]
    assert target.rows() == before


def test_a_row_changed_since_the_step_is_left_alone_and_the_step_stays_standing(
    db_url: str, target: Target, rollback: Callable[..., Done], plan: Callable[[str, Path], Done]
) -> None:
    with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
        run = ledger.start_run()
        run.call("sql.update", {"db": "shop", "table": "items", "key": {"id": 3}, "values": {"qty": 10}}, sql.update)
        run.call("sql.insert", {"db": "shop", "table": "items", "rows": [{"id": 7, "name": "lime"}]}, sql.insert)
    target.execute("UPDATE items SET qty = 11 WHERE id = 3", "UPDATE items SET name = 'key lime' WHERE id = 7")
    changed = target.rows()

    done = rollback(run.id, MANIFEST)

    assert done.code == 2
    failed = {f["step"]: f["error"] for f in done.json()["failed"]}
    assert failed[1] == 'changed since step 1: the row of items with id=7: name is "key lime", the step left "lime"'
    assert failed[0] == "changed since step 0: the row of items with id=3: qty is 11, the step left 10"
    assert target.rows() == changed
    actions = plan(run.id, MANIFEST).json()["actions"]
    assert [a["kind"] for a in actions] == ["compensate", "compensate"]


def test_each_compensation_repeated_with_its_key_changes_nothing_and_answers_the_same(
    db_url: str, target: Target, plan: Callable[[str, Path], Done]
) -> None:
    before = target.rows()
    with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
        run_id = _agent_run(ledger, target.name)
    for call in compensation_calls(plan(run_id, MANIFEST).json()):
        first = connectors_cli("compensate", stdin=json.dumps(call))
        assert first.code == 0, first.err
        undone = target.rows()
        again = connectors_cli("compensate", stdin=json.dumps({**call, "attempt": 2}))
        assert (again.code, json.loads(again.out)) == (0, json.loads(first.out))
        assert target.rows() == undone
    assert target.rows() == before


def test_a_password_stays_in_the_configuration_and_results_name_the_database(
    db_url: str, rollback: Callable[..., Done], monkeypatch: pytest.MonkeyPatch
) -> None:
    with _postgres_shop(password="s3cret") as target:
        before = target.rows()
        monkeypatch.setenv("REVERSI_SQL_URL", target.url)
        with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
            run = ledger.start_run()
            result = run.call("sql.delete", {"table": "items", "key": {"id": 1}}, sql.delete)
        assert "s3cret" not in json.dumps(result) and result["db"] == "default"

        assert rollback(run.id, MANIFEST).code == 0
        assert target.rows() == before
        exported = reversi_cli("--db", db_url, "export", "--run", run.id)
        assert run.id in exported.out and "s3cret" not in exported.out


def test_names_from_arguments_must_be_in_the_live_schema(target: Target) -> None:
    with pytest.raises(BadArgument, match=re.escape("bad argument table: no table 'items; DROP TABLE items'")):
        sql.select(db=target.name, table="items; DROP TABLE items", key={"id": 1})
    with pytest.raises(BadArgument, match=re.escape("""bad argument values: items has no column 'qty" = 0; --'""")):
        sql.update(db=target.name, table="items", key={"id": 1}, values={'qty" = 0; --': 1})
    with pytest.raises(BadArgument, match="bad argument key: expected the primary key of items: id"):
        sql.delete(db=target.name, table="items", key={"name": "apple"})
    with pytest.raises(BadArgument, match="log has no primary key"):
        sql.insert(db=target.name, table="log", rows=[{"line": "x"}])
    with pytest.raises(BadArgument, match="bad argument values: give columns to set, not the primary key"):
        sql.update(db=target.name, table="items", key={"id": 1}, values={"id": 5})
    assert len(target.rows()["items"]) == 3


def test_a_table_name_is_matched_exactly_and_quoted(monkeypatch: pytest.MonkeyPatch) -> None:
    with _postgres_shop() as target:  # the column with a quote in its name is in the PostgreSQL schema
        target.configure(monkeypatch)
        done = sql.update(db=target.name, table="tags", key={"item_id": 1, "tag": "fruit"},
                          values={'Odd "name"': "y"})
        assert sql.select(db=target.name, table="tags", keys=done["keys"])["row"]['Odd "name"'] == "y"
        with pytest.raises(BadArgument, match="no table 'ITEMS'"):
            sql.select(db=target.name, table="ITEMS", key={"id": 1})


def test_a_failed_statement_changes_nothing_and_says_what_the_database_said(target: Target) -> None:
    rows = [{"id": 50, "name": "ok"}, {"id": 51, "name": None}]
    with pytest.raises(reversi.errors.ReversiError, match=r"NOT NULL|not-null"):
        sql.insert(db=target.name, table="items", rows=rows)
    assert sql.select(db=target.name, table="items", key={"id": 50})["count"] == 0


def test_restore_puts_back_all_rows_or_none(target: Target) -> None:
    deleted = sql.delete(db=target.name, table="items", key={"id": 1})
    target.execute("INSERT INTO items (id, name) VALUES (1, 'impostor')")
    with pytest.raises(ChangedSince, match=r"^changed since step 4: the row of items with id=1 exists again$"):
        sql.restore_rows(deleted, step=4)
    assert sql.select(db=target.name, table="items", key={"id": 1})["row"]["name"] == "impostor"


def test_a_missing_sqlite_file_is_not_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    done = connectors_cli("read", stdin=json.dumps({"tool": "sql.select", "arguments": {"table": "t", "key": {}}}))
    assert (done.code, done.err) == (
        1, "bad argument db: no database is configured (set REVERSI_SQL_DATABASES or REVERSI_SQL_URL)\n")
    monkeypatch.setenv("REVERSI_SQL_DATABASES", f"gone=sqlite:///{tmp_path}/nothing.db")
    missing = f"bad argument db: gone: no SQLite database at {tmp_path}/nothing.db"
    with pytest.raises(BadArgument, match=re.escape(missing)):
        sql.select(db="gone", table="items", key={"id": 1})
    assert not (tmp_path / "nothing.db").exists()


def test_the_shipped_manifests_pass_the_real_check(tmp_path: Path) -> None:
    assert reversi_cli("manifest", "check", str(MANIFEST)).code == 0
    combined = tmp_path / "all.yaml"
    combined.write_text(connectors_cli("manifest").out)
    done = reversi_cli("manifest", "check", str(combined))
    assert done.code == 0 and "warning" not in done.out, done.out
