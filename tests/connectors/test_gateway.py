"""The connectors behind `reversi-gateway`: an agent acts through it, the operator endpoint undoes the run
by calling the compensations and read-backs on the same `reversi-connectors serve` upstream."""

from __future__ import annotations

import hashlib
import os
import shlex
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters, types
from tests.connectors.conftest import CONNECTORS, connectors_cli, files_under
from tests.connectors.fake_server import URL, served_with

from reversi.demo.fakes.stripe import KEY, FakeStripe

GATEWAY = str(Path(sys.executable).parent / "reversi-gateway")

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def _gateway(*args: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=GATEWAY, args=list(args), env=dict(os.environ), cwd=os.getcwd())
    async with Client(params, cache=None) as client:
        yield client


def _ok(result: types.CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


async def test_the_gateways_operator_rolls_back_fs_and_sql_through_the_connectors_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "world"
    root.mkdir()
    (root / "notes.txt").write_text("mine\n")
    monkeypatch.setenv("REVERSI_FS_ROOT", str(root))
    shop = tmp_path / "shop.db"
    with sqlite3.connect(shop) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER)")
        conn.execute("INSERT INTO items VALUES (1, 'apple', 5)")
    monkeypatch.setenv("REVERSI_SQL_URL", f"sqlite:///{shop}")
    manifest = tmp_path / "connectors.yaml"
    manifest.write_text(connectors_cli("manifest", "fs", "sql").out)
    common = ["--upstream", f"c={shlex.join([CONNECTORS, 'serve', 'fs', 'sql'])}",
              "--db", f"sqlite:///{tmp_path}/reversi.db", "-m", str(manifest)]
    files_before = files_under(root)

    async with _gateway(*common, "--run-id", "run_gw") as agent:
        written = _ok(await agent.call_tool("fs.write_file", {"path": "notes.txt", "content": "the agent's\n"}))
        # sealed to the step the gateway journaled it as: replayed in another step, it would not be undone
        assert written["reversi_seal"]["args"]["reversi_call"] == {"run_id": "run_gw", "step": 0}
        _ok(await agent.call_tool("fs.write_file", {"path": "new.txt", "content": "new\n"}))
        _ok(await agent.call_tool("sql.update", {"table": "items", "key": {"id": 1}, "values": {"qty": 0}}))
        _ok(await agent.call_tool("sql.insert", {"table": "items", "rows": [{"name": "kiwi"}]}))
        assert _ok(await agent.call_tool("fs.stat", {"path": "new.txt"}))["exists"] is True

    async with _gateway("operator", *common) as operator:
        plan = _ok(await operator.call_tool("reversi.plan_rollback", {"run_id": "run_gw"}))
        assert [(a["step"], a["kind"]) for a in plan["actions"]] == [
            (4, "skip"), (3, "compensate"), (2, "compensate"), (1, "compensate"), (0, "compensate")]
        report = _ok(await operator.call_tool("reversi.execute_rollback", {"run_id": "run_gw", "confirm": True}))

    assert report["complete"] is True and report["compensated"] == [3, 2, 1, 0], report
    assert files_under(root) == files_before
    with sqlite3.connect(shop) as conn:
        assert conn.execute("SELECT * FROM items").fetchall() == [(1, "apple", 5)]


async def test_the_operator_rollback_sends_its_key_through_mcp_to_stripes_idempotency_key_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with served_with(FakeStripe(), monkeypatch, STRIPE_API_BASE=URL, STRIPE_API_KEY=KEY) as fake:
        manifest = tmp_path / "stripe.yaml"
        manifest.write_text(connectors_cli("manifest", "stripe").out)
        common = ["--upstream", f"c={shlex.join([CONNECTORS, 'serve', 'stripe'])}",
                  "--db", f"sqlite:///{tmp_path}/reversi.db", "-m", str(manifest)]
        async with _gateway(*common, "--run-id", "run_pay") as agent:
            charge = _ok(await agent.call_tool("stripe.create_charge", {"amount": 500, "currency": "eur"}))
        async with _gateway("operator", *common) as operator:
            report = _ok(await operator.call_tool("reversi.execute_rollback", {"run_id": "run_pay", "confirm": True}))

    assert report["complete"] is True and report["compensated"] == [0], report
    key = hashlib.sha256(b"run_pay:0:stripe.refund").hexdigest()
    assert fake.effects == {f"/v1/refunds {key}": 1}
    assert fake.charges[charge["id"]]["refunded"] is True


async def test_a_prefixed_connector_behind_a_gateway_with_two_upstreams_is_undone_in_the_step_that_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With several upstreams the run journals `c.fs.write_file` and its undo as `c.fs.restore...`: the
    connector is told that name, so the undo's key matches the step its result is sealed to."""
    from reversi.core.manifest_prefix import prefixed

    root = tmp_path / "world"
    root.mkdir()
    (root / "notes.txt").write_text("mine\n")
    monkeypatch.setenv("REVERSI_FS_ROOT", str(root))
    shop = tmp_path / "shop.db"
    with sqlite3.connect(shop) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, qty INTEGER)")
        conn.execute("INSERT INTO items VALUES (1, 5)")
    monkeypatch.setenv("REVERSI_SQL_URL", f"sqlite:///{shop}")
    manifests = []
    for name, connector in (("c", "fs"), ("d", "sql")):
        manifests += ["-m", str(tmp_path / f"{name}.yaml")]
        (tmp_path / f"{name}.yaml").write_text(prefixed(connectors_cli("manifest", connector).out, name))
    common = ["--upstream", f"c={shlex.join([CONNECTORS, 'serve', 'fs'])}",
              "--upstream", f"d={shlex.join([CONNECTORS, 'serve', 'sql'])}",
              "--db", f"sqlite:///{tmp_path}/reversi.db", *manifests]
    files_before = files_under(root)

    async with _gateway(*common, "--run-id", "run_two") as agent:
        _ok(await agent.call_tool("c.fs.write_file", {"path": "notes.txt", "content": "the agent's\n"}))
        _ok(await agent.call_tool("d.sql.update", {"table": "items", "key": {"id": 1}, "values": {"qty": 0}}))

    async with _gateway("operator", *common) as operator:
        report = _ok(await operator.call_tool("reversi.execute_rollback", {"run_id": "run_two", "confirm": True}))

    assert report["complete"] is True and report["compensated"] == [1, 0], report
    assert files_under(root) == files_before
    with sqlite3.connect(shop) as conn:
        assert conn.execute("SELECT * FROM items").fetchall() == [(1, 5)]
