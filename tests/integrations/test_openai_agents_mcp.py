"""The OpenAI Agents SDK's `mcp_servers=` (issue 29): a real MCP server (tests/gateway/upstream_server.py,
on the official SDK) started by the Agents SDK's own `MCPServerStdio`, wrapped by `journaled_mcp`;
the scripted offline model calls its tools; each call journaled, an error answer journaled `failed`,
a refusal answered with the reason, and the run rolls back through the server's own undo tool."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner
from agents.mcp import MCPServerStdio
from tests.gateway.conftest import UPSTREAM
from tests.integrations.test_openai_agents import ScriptedModel

import reversi
from reversi.integrations.openai_agents import journaled_mcp

MANIFEST = """\
version: 1
tools:
  create_order:
    compensation: {tool: cancel_order, args: {order_id: "$args.order_id"}}
  fail: {irreversible: true}
"""


def _run_agent(run: reversi.Run, data: Path, *calls: tuple[str, dict[str, Any]]) -> ScriptedModel:
    model = ScriptedModel(list(calls))

    async def go() -> None:
        server = MCPServerStdio(params={"command": sys.executable, "args": [str(UPSTREAM), str(data)]}, name="shop")
        async with server:
            agent = Agent(name="shop", model=model, mcp_servers=[journaled_mcp(server, run)])
            await Runner.run(agent, "order", run_config=RunConfig(tracing_disabled=True))

    asyncio.run(go())
    return model


def test_the_agents_mcp_tool_calls_are_journaled_and_rolled_back(tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    data = tmp_path / "data"
    data.mkdir()
    with reversi.open(f"sqlite:///{tmp_path}/r.db", manifests=[str(tmp_path / "tools.yaml")]) as ledger:
        run = ledger.start_run(run_id="run_session-9")
        model = _run_agent(run, data, ("create_order", {"order_id": "o-1"}), ("fail", {}))
        steps = run.steps()
        assert [(s.tool, s.status.value) for s in steps] == [("create_order", "succeeded"), ("fail", "failed")]
        assert "ord_o-1" in model.seen[0]
        cancelled: list[Any] = []

        def cancel(call: dict[str, Any]) -> dict[str, bool]:
            cancelled.append(call["args"])
            return {"ok": True}

        report = run.rollback(cancel)
        assert report.compensated == [0] and cancelled == [{"order_id": "o-1"}]


def test_a_refused_mcp_call_reaches_the_model_and_the_server_never_sees_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        ledger.add_halt("orders frozen", tool="create_order")
        run = ledger.start_run()
        model = _run_agent(run, data, ("create_order", {"order_id": "o-2"}))
        assert "kill switch: orders frozen" in model.seen[0] and run.steps() == ()
    calls = (data / "calls.jsonl").read_text() if (data / "calls.jsonl").exists() else ""
    assert "create_order" not in calls
