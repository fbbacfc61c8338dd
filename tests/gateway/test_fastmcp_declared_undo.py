"""Undos declared by a real FastMCP server (FastMCP 2, pinned, in a virtualenv of its own: it needs an
MCP SDK older than ours): one tool with the `x-compensation-pair` convention, one with SEP-3172's
`recovery`, one whose declaration names a tool the server does not have. The gateway takes them only
when the operator says so; the operator's rollback undoes what the agent booked and charged."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from tests.gateway.conftest import WAIT_S, gateway
from tests.gateway.pinned import FASTMCP

from reversi.core.manifest_yaml import parse_manifest

pytestmark = pytest.mark.anyio

SERVER = '''
import json, sys
from pathlib import Path
from fastmcp import FastMCP

STATE = Path(sys.argv[1])
mcp = FastMCP("travel")

def _load():
    return json.loads(STATE.read_text()) if STATE.exists() else {"bookings": {}, "charges": {}}

def _save(state):
    STATE.write_text(json.dumps(state, sort_keys=True))

@mcp.tool(annotations={"x-compensation-pair": "cancel_flight"})
def book_flight(destination: str) -> dict:
    state = _load()
    booking_id = f"FL-{len(state['bookings']) + 1}"
    state["bookings"][booking_id] = destination
    _save(state)
    return {"booking_id": booking_id, "destination": destination}

@mcp.tool
def cancel_flight(booking_id: str) -> dict:
    state = _load()
    state["bookings"].pop(booking_id, None)
    _save(state)
    return {"cancelled": booking_id}

@mcp.tool(annotations={"recovery": {"strategy": "compensation", "compensatingOperation": {
    "operationId": "refund_payment", "parameters": {"transactionId": "$response.body#/transactionId",
                                                    "reason": "rolled back"}}}})
def charge_payment(amount: int) -> dict:
    state = _load()
    transaction_id = f"TXN-{len(state['charges']) + 1}"
    state["charges"][transaction_id] = {"amount": amount, "refunded": None}
    _save(state)
    return {"transactionId": transaction_id, "amount": amount}

@mcp.tool
def refund_payment(transactionId: str, reason: str) -> dict:
    state = _load()
    state["charges"][transactionId]["refunded"] = reason
    _save(state)
    return {"refunded": transactionId}

@mcp.tool(annotations={"x-compensation-pair": "erase_everything_elsewhere"})
def send_postcard(text: str) -> dict:
    return {"sent": text}

if __name__ == "__main__":
    mcp.run(show_banner=False)
'''


def _flags(tmp_path: Path, *more: str) -> list[str]:
    script = tmp_path / "travel.py"
    script.write_text(SERVER)
    command = shlex.join([*FASTMCP.command(str(script)), str(tmp_path / "state.json")])
    return ["--upstream", f"travel={command}", "--db", f"sqlite:///{tmp_path}/r.db", *more]


def _ok(result: types.CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


async def test_a_fastmcp_servers_declared_undos_roll_the_agents_work_back(tmp_path: Path) -> None:
    flags = _flags(tmp_path)
    with tempfile.TemporaryFile("w+") as errlog:
        async with gateway(*flags, "--server-undo", "travel=trust", "--run-id", "run_trip", errlog=errlog) as agent:
            listed = {tool.name for tool in (await agent.list_tools()).tools}
            assert {"book_flight", "charge_payment"} <= listed
            _ok(await agent.call_tool("book_flight", {"destination": "Lisbon"}))
            _ok(await agent.call_tool("charge_payment", {"amount": 120}))
            _ok(await agent.call_tool("send_postcard", {"text": "wish you were here"}))
        errlog.seek(0)
        said = errlog.read()
    # a declaration naming a tool the server does not have is not used, and the operator hears why
    assert 'the undo "send_postcard" declares is not used' in said
    assert json.loads((tmp_path / "state.json").read_text())["bookings"] == {"FL-1": "Lisbon"}

    async with gateway("operator", *flags) as operator:
        plan = _ok(await operator.call_tool("reversi.plan_rollback", {"run_id": "run_trip"}))
        report = _ok(await operator.call_tool("reversi.execute_rollback", {"run_id": "run_trip", "confirm": True}))
    actions = {a["step"]: a for a in plan["actions"]}
    assert (actions[0]["compensation_tool"], actions[0]["args"], actions[0]["declared_by"]) == (
        "cancel_flight", {"booking_id": "FL-1"}, "server travel (x-compensation-pair)")
    assert (actions[1]["compensation_tool"], actions[1]["args"], actions[1]["declared_by"]) == (
        "refund_payment", {"transactionId": "TXN-1", "reason": "rolled back"}, "server travel (recovery)")
    assert actions[2]["kind"] == "unmanifested"
    assert sorted(report["compensated"]) == [0, 1]
    state = json.loads((tmp_path / "state.json").read_text())
    assert state == {"bookings": {}, "charges": {"TXN-1": {"amount": 120, "refunded": "rolled back"}}}


def test_a_draft_from_the_live_server_writes_its_declared_undos(tmp_path: Path) -> None:
    server = _flags(tmp_path)[1].partition("=")[2]
    done = subprocess.run([str(Path(sys.executable).parent / "reversi"), "manifest", "draft", "--upstream", server],
                          capture_output=True, text=True, timeout=WAIT_S, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    entries = {e.pattern: e for e in parse_manifest(done.stdout, "draft.yaml")[0]}
    assert entries["book_flight"].compensations[0].tool == "cancel_flight"
    assert entries["charge_payment"].compensations[0].args == {"transactionId": "$result.transactionId",
                                                               "reason": "rolled back"}
    assert '# REVIEW: upstream travel: the undo "send_postcard" declares is not used' in done.stdout
