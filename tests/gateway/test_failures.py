"""Calls whose effect is unknown are journaled `uncertain`, never lost: a timeout, an upstream killed
mid-call (and restarted), an agent that goes away mid-call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.gateway.conftest import GATEWAY, WAIT_S, Shop, gateway, until

import reversi

pytestmark = pytest.mark.anyio


def _steps(db: str, run_id: str) -> list[dict[str, Any]]:
    with reversi.open(db) as ledger:
        return [s.to_dict() for s in ledger.get_run(run_id).steps()]


async def test_a_call_that_times_out_is_uncertain(tmp_path: Path, shop: Shop) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    async with gateway("--upstream", shop.flag(), "--db", db, "--run-id", "run_slow", "--call-timeout", "0.5") as agent:
        result = await agent.call_tool("wait", {"key": "never"})
        assert result.is_error
        assert "did not answer within 0.5 s" in result.content[0].text  # type: ignore[union-attr]
        assert "step 0 of run_slow is uncertain" in result.content[0].text  # type: ignore[union-attr]
        assert (await agent.call_tool("echo", {"text": "still here"})).content[0].text == "still here"  # type: ignore[union-attr]
    steps = _steps(db, "run_slow")
    assert [s["status"] for s in steps] == ["uncertain", "succeeded"]
    assert steps[0]["error"] == "upstream shop did not answer within 0.5 s"


async def test_an_upstream_killed_mid_call_is_uncertain_and_restarted(tmp_path: Path, shop: Shop) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    async with gateway("--upstream", shop.flag(), "--db", db, "--run-id", "run_killed") as agent:
        outcome: dict[str, Any] = {}

        async def call() -> None:
            outcome["result"] = await agent.call_tool("wait", {"key": "k"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            pid = await until(lambda: shop.started("k"), "the upstream to start the call")
            os.kill(pid, signal.SIGKILL)
        assert outcome["result"].is_error
        assert "went away during the call" in outcome["result"].content[0].text
        # restarting or back already: tools/list answers either way (a down upstream keeps its last list)
        assert "echo" in [t.name for t in (await agent.list_tools()).tools]
        restarted = await agent.call_tool("echo", {"text": "back"})
        assert restarted.content[0].text == "back"  # type: ignore[union-attr]
    steps = _steps(db, "run_killed")
    assert [s["status"] for s in steps] == ["uncertain", "succeeded"]
    assert "went away" in steps[0]["error"]


async def test_an_agent_that_disconnects_mid_call_leaves_the_step_uncertain(tmp_path: Path, shop: Shop) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    async with anyio.create_task_group() as tg:

        async def agent_session() -> None:
            async with gateway("--upstream", shop.flag(), "--db", db, "--run-id", "run_gone") as agent:
                await agent.call_tool("wait", {"key": "d"})

        tg.start_soon(agent_session)
        await until(lambda: shop.started("d"), "the upstream to start the call")
        tg.cancel_scope.cancel()  # the agent hangs up: the gateway's stdin closes with the call in flight
    steps = await until(lambda: [s for s in _steps(db, "run_gone") if s["status"] != "intended"], "the outcome")
    assert steps[0]["status"] == "uncertain"
    assert steps[0]["error"] == "the call was cancelled before it answered"


def test_a_message_over_the_line_limit_is_answered_with_a_parse_error_and_the_gateway_serves_on(
    tmp_path: Path, shop: Shop
) -> None:
    proc = subprocess.Popen(
        [str(GATEWAY), "--upstream", shop.flag(), "--db", f"sqlite:///{tmp_path}/r.db", "--run-id", "run_big"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        huge = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + b"x" * (65 << 20) + b'"}}\n'
        proc.stdin.write(huge)
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode() + b"\n")
        proc.stdin.flush()
        refused = json.loads(proc.stdout.readline())
        assert (refused["id"], refused["error"]["code"]) == (None, -32700)
        assert json.loads(proc.stdout.readline())["id"] == 2  # still serving
    finally:
        proc.stdin.close()
        code = proc.wait(WAIT_S)
    assert code == 0 and b"Traceback" not in proc.stderr.read()
