"""Refused calls (kill file, halts, enforce mode, duplicates, forward approvals) come back as tool
errors, are journaled `refused`, and never reach the upstream."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import types
from tests.gateway.conftest import Shop, gateway

import reversi

pytestmark = pytest.mark.anyio


def _text(result: types.CallToolResult) -> str:
    assert result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_refusals_are_tool_errors_that_never_reach_the_upstream(
    db_url: str, tmp_path: Path, shop: Shop, shop_manifest: str
) -> None:
    kill_file = tmp_path / "kill"
    flags = ["--upstream", shop.flag(), "--db", db_url, "-m", shop_manifest, "--mode", "enforce", "--run-id", "run_no"]
    with reversi.open(db_url) as ledger:
        async with gateway(*flags, env={"REVERSI_KILL_FILE": str(kill_file)}) as agent:
            assert not (await agent.call_tool("create_order", {"order_id": "o1"})).is_error
            assert _text(await agent.call_tool("create_order", {"order_id": "o1"})) == (
                "duplicate call: step 0 of run_no already did this"
            )
            assert _text(await agent.call_tool("fail", {})) == "no manifest entry for fail"

            asked = _text(await agent.call_tool("env", {"name": "HOME"}))
            assert asked.startswith("approval required: apr_")
            ledger.approve(asked.removeprefix("approval required: "), by="dana")
            assert not (await agent.call_tool("env", {"name": "HOME"})).is_error

            halt = ledger.add_halt("looking into it", tool="echo", by="dana")
            assert _text(await agent.call_tool("echo", {"text": "x"})) == (  # the model is told it is not all
                f"kill switch: looking into it (halt {halt.halt_id} stops only calls with tool=echo)")
            ledger.lift_halts(halt.halt_id)

            kill_file.write_text("maintenance\n")
            assert _text(await agent.call_tool("get_order", {"order_id": "o1"})) == "kill switch: maintenance"
            kill_file.unlink()
            assert not (await agent.call_tool("echo", {"text": "x"})).is_error
        events = ledger.get_run("run_no").events()
        steps = ledger.get_run("run_no").steps()
    assert [c["tool"] for c in shop.calls()] == ["create_order", "env", "echo"]
    assert [s.tool for s in steps] == ["create_order", "env", "echo"]
    refused = [e.data["reason"] for e in events if e.type == "refused"]
    assert len(refused) == 5 and refused[0].startswith("duplicate call")
