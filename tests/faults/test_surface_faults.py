"""`reversi-server` and `reversi-gateway`, long-lived processes, over a store that breaks under them and
comes back: every refusal is one line (503 `store_unavailable`, or an MCP tool error), no call
reaches the upstream unless its `intended` is durable, a call in flight when the store broke is
left `intended` rather than called anything it was not, and the same processes serve again once the
store is back, with no restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import types
from tests.faults.conftest import Fault
from tests.gateway.conftest import Shop, gateway, until
from tests.gateway.http_wire import GatewayProcess, answer_of, mcp_request
from tests.server.conftest import ServerProcess

import reversi


def steps_of(url: str, run_id: str) -> list[tuple[Any, str]]:
    with reversi.open(url) as ledger:
        return [(s.args, s.status.value) for s in ledger.get_run(run_id).steps()]


def refused_in_one_line(answer: httpx.Response) -> str:
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error["code"] == "store_unavailable" and "\n" not in error["message"], error
    return str(error["message"])


def test_the_server_answers_503_in_one_line_while_the_store_is_broken_and_serves_again_after(
    fault: Fault, manifest: Path, tmp_path: Path
) -> None:
    server = ServerProcess(fault.url, {"REVERSI_MANIFEST": str(manifest)}, tmp_path / "server.log")
    try:
        with httpx.Client(base_url=server.url, timeout=30) as agent:
            run_id = agent.post("/v1/runs", json={}).json()["run_id"]
            steps = f"/v1/runs/{run_id}/steps"
            assert agent.post(steps, json={"tool": "crm.upsert_contact", "args": {"n": 0}}).status_code == 201
            assert agent.post(f"{steps}/0/outcome", json={"status": "succeeded", "result": {}}).status_code == 200
            assert agent.post(steps, json={"tool": "crm.upsert_contact", "args": {"n": 1}}).status_code == 201
            fault.inject()  # step 1's call is in flight
            for _ in range(3):
                refused_in_one_line(agent.post(steps, json={"tool": "crm.upsert_contact", "args": {"n": 2}}))
            refused_in_one_line(agent.post(f"{steps}/1/outcome", json={"status": "succeeded", "result": {}}))
            assert agent.get("/healthz").status_code == 200
            fault.heal()
            assert steps_of(fault.url, run_id) == [({"n": 0}, "succeeded"), ({"n": 1}, "intended")]
            assert agent.post(f"{steps}/1/outcome", json={"status": "succeeded", "result": {}}).status_code == 200
            assert agent.post(steps, json={"tool": "crm.upsert_contact", "args": {"n": 3}}).json()["step"] == 2
    finally:
        server.signal(15)
    assert "Traceback" not in (tmp_path / "server.log").read_text()
    assert [status for _, status in steps_of(fault.url, run_id)] == ["succeeded", "succeeded", "intended"]


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.anyio
async def test_the_gateway_forwards_nothing_while_the_store_is_broken_and_serves_again_after(
    fault: Fault, shop: Shop, shop_manifest: str, tmp_path: Path
) -> None:
    flags = ["--upstream", shop.flag(), "--db", fault.url, "-m", shop_manifest, "--run-id", "run_faults"]
    with (tmp_path / "gateway.log").open("w") as errlog:
        async with gateway(*flags, errlog=errlog) as agent:
            assert not (await agent.call_tool("create_order", {"order_id": "a"})).is_error
            fault.inject()
            for order in ("b", "c"):
                refused = await agent.call_tool("create_order", {"order_id": order})
                assert refused.is_error and "store" in _text(refused) and "\n" not in _text(refused), refused
            assert [c["arguments"]["order_id"] for c in shop.calls("create_order")] == ["a"]
            fault.heal()
            assert not (await agent.call_tool("create_order", {"order_id": "d"})).is_error

            answers: list[types.CallToolResult] = []

            async def in_flight() -> None:
                answers.append(await agent.call_tool("wait", {"key": "k"}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(in_flight)
                await until(lambda: shop.started("k"), "the upstream to start the call")
                fault.inject()
                shop.release("k")
            assert not answers[0].is_error  # the upstream's answer, as it came: the call was made
            fault.heal()
            assert not (await agent.call_tool("echo", {"text": "back"})).is_error
    assert [c["tool"] for c in shop.calls()] == ["create_order", "create_order", "wait", "echo"]
    assert steps_of(fault.url, "run_faults") == [
        ({"order_id": "a"}, "succeeded"), ({"order_id": "d"}, "succeeded"), ({"key": "k"}, "intended"),
        ({"text": "back"}, "succeeded")]
    assert "Traceback" not in (tmp_path / "gateway.log").read_text()


def test_the_gateway_over_http_forwards_nothing_while_the_store_is_broken_and_serves_again_after(
    fault: Fault, shop: Shop, shop_manifest: str, tmp_path: Path
) -> None:
    gateway_http = GatewayProcess(["--upstream", shop.flag(), "--db", fault.url, "-m", shop_manifest],
                                  tmp_path / "gateway.log")
    run_id = "run_http_faults"

    def create(client: httpx.Client, order: str) -> httpx.Response:
        headers, body = mcp_request("tools/call", {"name": "create_order", "arguments": {"order_id": order}})
        return client.post("/mcp", json=body, headers={**headers, "Reversi-Run-Id": run_id})

    try:
        with httpx.Client(base_url=gateway_http.url, timeout=30) as client:
            assert answer_of(create(client, "a").text)["result"]["isError"] is False
            fault.inject()
            for order in ("b", "c"):
                answer = create(client, order)
                if answer.status_code == 503:  # the store could not say who is asking
                    refused_in_one_line(answer)
                else:
                    text = answer_of(answer.text)["result"]["content"][0]["text"]
                    assert "store" in text and "\n" not in text, text
            assert [c["arguments"]["order_id"] for c in shop.calls("create_order")] == ["a"]
            fault.heal()
            assert answer_of(create(client, "d").text)["result"]["isError"] is False
    finally:
        gateway_http.stop()
    assert [c["arguments"]["order_id"] for c in shop.calls("create_order")] == ["a", "d"]
    assert steps_of(fault.url, run_id) == [({"order_id": "a"}, "succeeded"), ({"order_id": "d"}, "succeeded")]
    assert "Traceback" not in (tmp_path / "gateway.log").read_text()
