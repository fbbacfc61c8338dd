"""The sql connector acts only on the databases its operator named (issue 24, finding 1): an agent
names one of them, never gives a URL; Reversi's own store is refused even when it is configured, so an
agent key cannot write an admin key into it; and a URL in `db` connects nowhere, so it probes no port."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shlex
import socket
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters, types
from tests.connectors.conftest import CONNECTORS, connectors_cli
from tests.gateway.conftest import serve  # noqa: F401  (the fixture)
from tests.gateway.test_http import _bearer, connect
from tests.server.conftest import ServerProcess, spawn_server  # noqa: F401  (the fixture)

import reversi
from reversi.connectors import BadArgument, sql
from reversi.core.models import utc_now
from reversi.engine.keys import create_key

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _shop(folder: Path) -> str:
    folder.mkdir(exist_ok=True)
    path = folder / "shop.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO items VALUES (1, 'apple')")
    return f"sqlite:///{path}"


def _forged_admin_key() -> tuple[str, dict[str, Any]]:
    """A key in Reversi's format and the `api_keys` row that would make it an admin's."""
    key_id, secret = "mallory00001", secrets.token_urlsafe(32)
    row = {"key_id": key_id, "name": "mallory", "role": "admin", "tenant": None,
           "secret_sha256": hashlib.sha256(secret.encode()).hexdigest(), "created_at": utc_now(), "revoked_at": None}
    return f"rvk_{key_id}_{secret}", row


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_an_agent_key_through_the_http_gateway_cannot_write_a_key_into_reversis_own_store(
    db_url: str, tmp_path: Path, serve: Callable[..., str],  # noqa: F811
    spawn_server: Callable[[dict[str, str]], ServerProcess],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with reversi.open(db_url) as ledger:
        agent_key = create_key(ledger.store, "bot", "agent")[1]
        admin_key = create_key(ledger.store, "ops", "admin")[1]
    shop = _shop(tmp_path)
    # The operator even configured the store, by mistake, beside the shop: it is still refused.
    monkeypatch.setenv("REVERSI_SQL_DATABASES", f"shop={shop} ledger={db_url}")
    monkeypatch.setenv("REVERSI_CONNECTOR_DIR", str(tmp_path / "connectors"))
    manifest = tmp_path / "connectors.yaml"
    manifest.write_text(connectors_cli("manifest", "fs", "sql").out)
    base = serve("--upstream", f"c={shlex.join([CONNECTORS, 'serve', 'fs', 'sql'])}", "--db", db_url,
                 "-m", str(manifest))
    forged_key, row = _forged_admin_key()

    async with connect(f"{base}/mcp", _bearer(agent_key)) as agent:
        by_url = await agent.call_tool("sql.insert", {"db": db_url, "table": "api_keys", "rows": [row]})
        by_name = await agent.call_tool("sql.insert", {"db": "ledger", "table": "api_keys", "rows": [row]})
        read = await agent.call_tool("sql.select", {"db": "ledger", "table": "api_keys", "key": {"key_id": "x"}})
        fine = await agent.call_tool("sql.insert", {"db": "shop", "table": "items", "rows": [{"name": "kiwi"}]})

    assert by_url.is_error and _text(by_url) == (
        "bad argument db: give the name of a configured database, not a URL (configured: shop, ledger)")
    refused = "bad argument db: ledger is Reversi's own store: the sql connector never acts on it"
    assert by_name.is_error and _text(by_name) == refused
    assert read.is_error and _text(read) == refused
    assert not fine.is_error and fine.structured_content is not None and fine.structured_content["db"] == "shop"

    server = spawn_server({})
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.get("/v1/keys", headers=_bearer(forged_key)).status_code == 401
        listed = http.get("/v1/keys", headers=_bearer(admin_key))
    assert listed.status_code == 200 and "mallory" not in listed.text


@contextmanager
def _listening() -> Iterator[socket.socket]:
    """An open loopback port that counts as reached if anything connects to it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        yield listener


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_url_in_db_connects_nowhere_so_a_closed_and_an_open_port_answer_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVERSI_SQL_URL", _shop(tmp_path))
    monkeypatch.setenv("REVERSI_CONNECTOR_DIR", str(tmp_path / "connectors"))
    with _listening() as listener:
        open_port = listener.getsockname()[1]
        urls = [f"postgresql://127.0.0.1:{_closed_port()}/x", "postgresql://127.0.0.1:5432/test",
                f"postgresql://127.0.0.1:{open_port}/x", f"postgres://u:pw@127.0.0.1:{open_port}/x?sslmode=disable"]
        params = StdioServerParameters(command=CONNECTORS, args=["serve", "sql"], env=dict(os.environ))
        async with Client(params, cache=None) as client:
            said = {_text(await client.call_tool("sql.select", {"db": url, "table": "items", "key": {"id": 1}}))
                    for url in urls}
        said |= {connectors_cli("read", stdin=json.dumps(
            {"tool": "sql.select", "arguments": {"db": url, "table": "items", "key": {"id": 1}}})).err.strip()
            for url in urls}
        with pytest.raises(BlockingIOError):  # nothing ever connected to the open port
            listener.accept()
    assert said == {"bad argument db: give the name of a configured database, not a URL (configured: default)"}


def test_the_databases_are_named_by_the_operator_with_one_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    shop, crm = _shop(tmp_path), _shop(tmp_path / "crm")
    monkeypatch.setenv("REVERSI_SQL_DATABASES", f"shop={shop}\n  crm={crm}")
    assert sql.select(table="items", key={"id": 1})["db"] == "shop"  # the first is the default
    assert sql.select(db="crm", table="items", key={"id": 1})["db"] == "crm"
    with pytest.raises(BadArgument, match=re.escape(
            "bad argument db: no database named 'CRM' is configured (configured: shop, crm)")):
        sql.select(db="CRM", table="items", key={"id": 1})
    monkeypatch.setenv("REVERSI_SQL_DATABASES", f"shop={shop} default={crm}")
    assert sql.select(table="items", key={"id": 1})["db"] == "default"  # the one named default
    monkeypatch.setenv("REVERSI_SQL_DATABASES", f"shop={shop}")
    monkeypatch.setenv("REVERSI_SQL_URL", crm)
    assert sql.select(table="items", key={"id": 1})["db"] == "default"  # REVERSI_SQL_URL is that one
    with pytest.raises(BadArgument, match=re.escape("not a URL (configured: default, shop)")):
        sql.select(db=crm, table="items", key={"id": 1})


@pytest.mark.parametrize(("databases", "url", "said"), [
    ("shop", None, "REVERSI_SQL_DATABASES: entry 1 is not NAME=URL"),
    ("a=sqlite:///a.db crm:postgresql://u:hunter2@127.0.0.1/x", None, "REVERSI_SQL_DATABASES: entry 2 is not NAME=URL"),
    ("a=sqlite:///a.db a=sqlite:///b.db", None, "REVERSI_SQL_DATABASES: the name a is given twice"),
    ("a=mysql://u:hunter2@127.0.0.1/x", None, "REVERSI_SQL_DATABASES: a: the URL must start with sqlite:/// or "),
    ("../x=sqlite:///a.db", None, "REVERSI_SQL_DATABASES: entry 1 is not NAME=URL"),
    (None, "127.0.0.1:5432", "REVERSI_SQL_URL: the URL must start with sqlite:/// or postgresql://"),
    ("default=sqlite:///a.db", "sqlite:///b.db", "REVERSI_SQL_URL and REVERSI_SQL_DATABASES both name the database"),
])
def test_a_malformed_configuration_is_one_line_naming_the_variable_and_no_password(
    databases: str | None, url: str | None, said: str
) -> None:
    env = {k: v for k, v in {"REVERSI_SQL_DATABASES": databases, "REVERSI_SQL_URL": url}.items() if v is not None}
    request = {"tool": "sql.select", "arguments": {"table": "items", "key": {"id": 1}}}
    done = connectors_cli("read", stdin=json.dumps(request), env=env)
    assert done.code == 1 and done.err.startswith(said) and done.err.count("\n") == 1, done.err
    assert "hunter2" not in done.err and not Path("a.db").exists()


def test_the_store_this_process_was_given_is_refused_by_its_url_before_it_has_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shop = _shop(tmp_path)
    (tmp_path / "link.db").symlink_to(tmp_path / "shop.db")
    monkeypatch.setenv("REVERSI_DB", "sqlite:///link.db")  # the same file, spelled otherwise
    monkeypatch.setenv("REVERSI_SQL_DATABASES", f"ledger={shop}")
    before = sqlite3.connect(tmp_path / "shop.db").execute("SELECT * FROM items").fetchall()
    done = connectors_cli("read", stdin=json.dumps({"tool": "sql.select", "arguments": {"table": "items",
                                                                                         "key": {"id": 1}}}))
    assert (done.code, done.err) == (
        1, "bad argument db: ledger is Reversi's own store: the sql connector never acts on it\n")
    with pytest.raises(BadArgument, match="ledger is Reversi's own store"):
        sql.insert(table="items", rows=[{"name": "kiwi"}])
    assert sqlite3.connect(tmp_path / "shop.db").execute("SELECT * FROM items").fetchall() == before
