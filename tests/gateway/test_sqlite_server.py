"""The shipped sqlite manifest in front of the real mcp-server-sqlite (pinned, in a virtualenv of its
own: it needs an MCP SDK older than ours). The undo of a CREATE TABLE is a DROP built from the agent's
own statement and quoted, so a hostile table name drops that table and nothing else; a table that was
there before a CREATE TABLE IF NOT EXISTS is left alone; what cannot be undone says why (issue 28)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.gateway.pinned import SQLITE
from tests.gateway.test_shipped_manifests import World, _actions, _ok

import reversi

pytestmark = pytest.mark.anyio
HOSTILE = 'x; DROP TABLE customers; --'


def _schema(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()


async def test_tables_the_run_made_are_dropped_by_the_names_in_its_own_statements(tmp_path: Path) -> None:
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.executescript("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
                           "INSERT INTO customers VALUES (1, 'Ada');")
    before = _schema(db)
    world = World(tmp_path, "sqlite", SQLITE.command("--db-path", str(db)))
    async with world.agent() as agent:
        _ok(await agent.call_tool("create_table", {"query": "CREATE TABLE orders (id INTEGER, total REAL)"}))
        _ok(await agent.call_tool("create_table", {"query": f'CREATE TABLE "{HOSTILE}" (a)'}))
        _ok(await agent.call_tool("write_query", {"query": "create table if not exists customers (id INTEGER)"}))
        _ok(await agent.call_tool("write_query", {"query": "create table if not exists audit (at TEXT)"}))
        _ok(await agent.call_tool("write_query", {"query": "INSERT INTO customers VALUES (2, 'Bob')"}))
    plan, report = await world.roll_back()
    actions = _actions(plan)
    assert actions[0]["args"] == {"query": 'DROP TABLE "orders"'}
    assert actions[1]["args"] == {"query": f'DROP TABLE "{HOSTILE}"'}
    assert actions[1]["alternative"] == "drop the quoted table it made"
    assert actions[2]["kind"] == "unrecoverable" and "'customers'" in actions[2]["reason"]  # it was there
    assert actions[3]["args"] == {"query": 'DROP TABLE "audit"'}
    assert actions[4]["kind"] == "unrecoverable" and actions[4]["reason"].startswith("no compensation fits this call")
    assert sorted(report["compensated"]) == [0, 1, 3]
    assert _schema(db) == before  # the tables it made are gone; customers stands, with Bob (said to stay)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT name FROM customers ORDER BY id").fetchall() == [("Ada",), ("Bob",)]


async def test_a_text_answer_that_reads_as_json_keeps_its_text(tmp_path: Path) -> None:
    """Issue 28 item 7: `list_tables` of an empty database answers the text `[]`, which reads as a JSON
    list, while any other answer stays text. The journal keeps the text beside it (`$before_text`)."""
    db = tmp_path / "empty.db"
    sqlite3.connect(db).close()
    world = World(tmp_path, "sqlite", SQLITE.command("--db-path", str(db)))
    async with world.agent() as agent:
        _ok(await agent.call_tool("create_table", {"query": "CREATE TABLE orders (id INTEGER)"}))
        _ok(await agent.call_tool("create_table", {"query": "CREATE TABLE lines (id INTEGER)"}))
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        first, second = ledger.get_run("run_shipped").steps()
    assert (first.before, first.before_text) == ([], "[]")
    assert (second.before, second.before_text) == ("[{'name': 'orders'}]", None)  # text already: kept as is
    plan, report = await world.roll_back()
    assert [a["args"] for a in plan["actions"]] == [{"query": 'DROP TABLE "lines"'}, {"query": 'DROP TABLE "orders"'}]
    assert report["complete"] is True and _schema(db) == []
