"""The agent's `reversi.checkpoint` tool (with --checkpoint-tool) and the operator's rollback after a checkpoint,
through the official MCP client on stdio."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from mcp import types
from mcp.shared.exceptions import MCPError
from tests.gateway.conftest import Shop, gateway
from tests.gateway.test_http import _bearer, connect

import reversi
from reversi.engine.keys import create_key

pytestmark = pytest.mark.anyio


def _ok(result: types.CallToolResult) -> Any:
    assert not result.is_error, result
    return result.structured_content


def _text(result: types.CallToolResult) -> str:
    assert result.is_error, result
    return result.content[0].text  # type: ignore[union-attr]


async def test_the_agent_marks_a_checkpoint_and_the_operator_undoes_only_what_came_after(
    db_url: str, shop: Shop, shop_manifest: str
) -> None:
    common = ["--upstream", shop.flag(), "--db", db_url, "-m", shop_manifest]
    async with gateway(*common, "--run-id", "run_ckpt", "--checkpoint-tool") as agent:
        names = [t.name for t in (await agent.list_tools()).tools]
        assert "reversi.checkpoint" in names and "create_order" in names
        await agent.call_tool("create_order", {"order_id": "keep", "amount": 3})
        made = _ok(await agent.call_tool("reversi.checkpoint", {"name": "before the risky part"}))
        assert made["name"] == "before the risky part" and made["after_step"] == 0
        await agent.call_tool("create_order", {"order_id": "undo1", "amount": 4})
        await agent.call_tool("create_order", {"order_id": "undo2", "amount": 5})
        again = await agent.call_tool("reversi.checkpoint", {"name": "before the risky part"})
        assert "already has a checkpoint named" in _text(again)

        cases: list[tuple[dict[str, Any], str]] = [
            ({"name": "a\x1b[2Jb"}, "printable: it holds U+001B"),
            ({"name": "x\u202ey"}, "printable: it holds U+202E"),
            ({"name": "x" * 10_000}, "1-200 characters, not 10000"),
            ({"name": 7}, "must be a string, not int"),
            ({}, "reversi.checkpoint needs a name"),
            ({"name": "n", "\x1bextra": 1}, "has no argument '\\x1bextra'"),
        ]
        for arguments, message in cases:
            assert message in _text(await agent.call_tool("reversi.checkpoint", arguments)), arguments
        assert shop.calls("reversi.checkpoint") == []  # never forwarded upstream

        async with gateway("operator", *common) as operator:
            plan = _ok(await operator.call_tool("reversi.plan_rollback",
                                                {"run_id": "run_ckpt", "to": "before the risky part"}))
            assert [a["step"] for a in plan["actions"]] == [2, 1]
            assert plan["scope"] == {"after_step": 0, "checkpoint": "before the risky part"}
            both = await operator.call_tool("reversi.execute_rollback",
                                            {"run_id": "run_ckpt", "to": "before the risky part", "after_step": 0})
            assert "not both" in _text(both)
            unknown = await operator.call_tool("reversi.plan_rollback", {"run_id": "run_ckpt", "to": "nope"})
            assert "no checkpoint named 'nope'" in _text(unknown)
            report = _ok(await operator.call_tool(
                "reversi.execute_rollback", {"run_id": "run_ckpt", "to": "before the risky part", "confirm": True}))
            assert report["compensated"] == [2, 1] and report["scope"]["checkpoint"] == "before the risky part"
            assert sorted(c["arguments"]["order_id"] for c in shop.calls("cancel_order")) == ["undo1", "undo2"]
            whole = _ok(await operator.call_tool("reversi.execute_rollback",
                                                 {"run_id": "run_ckpt", "after_step": -1, "confirm": True}))
            assert whole["compensated"] == [0] and whole["skipped"] == [2, 1]
            assert sorted(c["arguments"]["order_id"] for c in shop.calls("cancel_order")) == ["keep", "undo1", "undo2"]

    with reversi.open(db_url) as ledger:
        run = ledger.get_run("run_ckpt")
        assert [(c.name, c.after_step) for c in run.checkpoints()] == [("before the risky part", 0)]


async def test_without_the_option_the_agent_is_offered_no_checkpoint_tool(
    db_url: str, shop: Shop, shop_manifest: str
) -> None:
    async with gateway("--upstream", shop.flag(), "--db", db_url, "-m", shop_manifest) as agent:
        assert "reversi.checkpoint" not in [t.name for t in (await agent.list_tools()).tools]
        try:
            said = _text(await agent.call_tool("reversi.checkpoint", {"name": "x"}))
        except MCPError as exc:  # the client's own check of the listed tools
            said = str(exc)
        assert "Unknown tool: reversi.checkpoint" in said
    with reversi.open(db_url) as ledger:
        assert all(ledger.get_run(s.run.run_id).checkpoints() == [] for s in ledger.list_runs())
    assert len(shop.calls("reversi.checkpoint")) == 1  # without the option it is the upstream's to answer


async def test_over_http_the_checkpoint_lands_in_the_keys_run_and_another_key_cannot_reach_it(
    db_url: str, http_shop: tuple[Shop, str], serve: Callable[..., str]
) -> None:
    shop, upstream_url = http_shop
    with reversi.open(db_url) as ledger:
        bot = create_key(ledger.store, "bot", "agent")[1]
        eve = create_key(ledger.store, "eve", "agent")[1]
    base = serve("--upstream", f"web={upstream_url}", "--db", db_url, "--checkpoint-tool")
    async with connect(f"{base}/mcp", _bearer(bot, **{"Reversi-Run-Id": "run_webck"})) as agent:
        await agent.call_tool("create_order", {"order_id": "w1"})
        made = _ok(await agent.call_tool("reversi.checkpoint", {"name": "one order in"}))
        assert made["after_step"] == 0
    async with httpx.AsyncClient(timeout=30) as raw:
        intruder = await raw.post(f"{base}/mcp", headers=_bearer(eve, **{"Reversi-Run-Id": "run_webck"}), json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "reversi.checkpoint", "arguments": {"name": "mine"}}})
    assert intruder.status_code == 403
    with reversi.open(db_url) as ledger:
        assert [c.name for c in ledger.get_run("run_webck").checkpoints()] == ["one order in"]
    assert [c["tool"] for c in shop.calls()] == ["create_order"]
