"""The operator's `reversi.plan_scope` and `reversi.rollback_scope` through the official MCP client on stdio:
every run a leaked key made is undone through the upstream's own tools, other principals' runs are left
alone, and bad arguments (and a `contain` with nothing to stop) are one-line tool errors."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types
from tests.gateway.conftest import Shop, gateway

import reversi

pytestmark = pytest.mark.anyio


def _ok(result: types.CallToolResult) -> Any:
    assert not result.is_error, result
    return result.structured_content


def _error(result: types.CallToolResult) -> str:
    assert result.is_error, result
    return result.content[0].text  # type: ignore[union-attr]


async def test_the_operator_rolls_back_everything_a_key_did(db_url: str, shop: Shop, shop_manifest: str) -> None:
    common = ["--upstream", shop.flag(), "--db", db_url, "-m", shop_manifest]
    for principal, run_id, orders in (("leaky", "run_l1", ["l1"]), ("leaky", "run_l2", ["l2", "l3"]),
                                      ("honest", "run_h", ["h1"])):
        async with gateway(*common, "--run-id", run_id, env={"REVERSI_PRINCIPAL": principal}) as agent:
            for order in orders:
                _ok(await agent.call_tool("create_order", {"order_id": order, "amount": 1}))

    async with gateway("operator", *common) as operator:
        plan = _ok(await operator.call_tool("reversi.plan_scope", {"key": "leaky"}))
        assert plan["runs"] == ["run_l2", "run_l1"] and plan["fully_reversible"]
        assert [(a["run"], a["step"]) for a in plan["actions"]] == [("run_l2", 1), ("run_l2", 0), ("run_l1", 0)]
        dry = _ok(await operator.call_tool("reversi.rollback_scope", {"key": "leaky"}))
        assert dry == plan and shop.calls("cancel_order") == []

        cases: list[tuple[dict[str, Any], str]] = [
            ({}, "needs a scope"),
            ({"key": "leaky", "confrim": True}, "has no argument 'confrim'"),
            ({"key": "leaky", "contain": True}, "give it with confirm: true"),
            ({"actor": "a\x1b[2J"}, "actor must be printable text"),
            ({"since": "someday"}, "since 'someday': expected a duration"),
            ({"labels": {"a": 1}}, "labels must map names to strings"),
        ]
        for arguments, message in cases:
            assert message in _error(await operator.call_tool("reversi.rollback_scope", arguments)), arguments

        keyless = await operator.call_tool("reversi.rollback_scope", {"key": "leaky", "confirm": True, "contain": True})
        assert "no active key is named leaky" in _error(keyless) and shop.calls("cancel_order") == []
        report = _ok(await operator.call_tool("reversi.rollback_scope", {"key": "leaky", "confirm": True}))
        assert report["complete"] and len(report["compensated"]) == 3
        assert sorted(c["arguments"]["order_id"] for c in shop.calls("cancel_order")) == ["l1", "l2", "l3"]
        again = _ok(await operator.call_tool("reversi.rollback_scope", {"key": "leaky", "confirm": True}))
        assert again["compensated"] == [] and len(again["already_undone"]) == 3
        assert len(shop.calls("cancel_order")) == 3

    with reversi.open(db_url) as ledger:
        assert ledger.get_run("run_h").steps()[0].status.value == "succeeded"
