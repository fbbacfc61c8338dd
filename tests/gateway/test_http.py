"""The gateway over streamable HTTP in front of an HTTP upstream: Bearer keys as principals, runs by
`Reversi-Run-Id` or by session, modern (stateless) and older handshake clients, the operator endpoint."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families
from starlette.responses import PlainTextResponse
from tests.gateway.conftest import GATEWAY, WAIT_S, Shop, until

import reversi
from reversi.engine.keys import Role, create_key
from reversi.gateway.http import _Guard

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def connect(url: str, headers: dict[str, str], mode: str = "auto") -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=WAIT_S) as http,
        Client(streamable_http_client(url, http_client=http), cache=None, mode=mode) as client,
    ):
        yield client


def _bearer(key: str, **more: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **more}


async def test_keys_name_the_principals_and_guard_both_endpoints(
    tmp_path: Path, http_shop: tuple[Shop, str], serve: Callable[..., str]
) -> None:
    shop, upstream_url = http_shop
    db = f"sqlite:///{tmp_path}/r.db"
    with reversi.open(db) as ledger:
        bot = create_key(ledger.store, "bot", "agent")[1]
        eve = create_key(ledger.store, "eve", "agent")[1]
        ops = create_key(ledger.store, "ops", "operator")[1]
        elsewhere = create_key(ledger.store, "elsewhere", "operator", "other-tenant")[1]
        viewer = create_key(ledger.store, "vic", "viewer")[1]
    base = serve("--upstream", f"web={upstream_url}", "--db", db)
    mcp_url, operator_url = f"{base}/mcp", f"{base}/operator/mcp"

    async with httpx2.AsyncClient(timeout=WAIT_S) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        assert (await http.post(mcp_url, json=body)).status_code == 401
        assert (await http.post(mcp_url, json=body, headers=_bearer("rvk_nope"))).status_code == 401
        assert (await http.post(operator_url, json=body, headers=_bearer(bot))).status_code == 403
        for url in (mcp_url, operator_url):  # a viewer only reads, and calling a tool is no read
            denied = await http.post(url, json=body, headers=_bearer(viewer))
            assert denied.status_code == 403 and "the key of vic is viewer" in denied.text
        bad = await http.post(mcp_url, json=body, headers=_bearer(bot, **{"Reversi-Run-Id": "nope"}))
        assert bad.status_code == 400 and "malformed run id" in bad.json()["error"]["message"]
        assert (await http.get(f"{base}/healthz")).json()["upstreams"]["web"]["tools"] == 11

    async with connect(mcp_url, _bearer(bot, **{"Reversi-Run-Id": "run_web"})) as agent:
        assert agent.protocol_version >= "2026"
        assert (await agent.call_tool("create_order", {"order_id": "w1"})).structured_content == {
            "id": "ord_w1",
            "amount": 0,
            "status": "placed",
        }
        await agent.call_tool("echo", {"text": "two"})
    async with connect(mcp_url, _bearer(bot), mode="legacy") as old:
        assert old.protocol_version < "2026"
        await old.call_tool("echo", {"text": "a"})
        await old.call_tool("echo", {"text": "b"})
    async with httpx.AsyncClient() as raw:  # SPEC 7: another principal's run is a 403, also by its header
        intruder = await raw.post(mcp_url, headers=_bearer(eve, **{"Reversi-Run-Id": "run_web"}),
                                  json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert intruder.status_code == 403
    assert intruder.json()["error"]["message"] == "run_web belongs to another principal"

    async with connect(operator_url, _bearer(ops)) as operator:
        listed = (await operator.call_tool("reversi.list_runs", {})).structured_content
        runs: dict[str, Any] = {r["run_id"]: r for r in listed["runs"]}
        assert runs["run_web"]["principal"] == "bot" and runs["run_web"]["steps"] == 2
        session_run = next(r for name, r in runs.items() if name != "run_web")
        assert session_run["steps"] == 2 and session_run["principal"] == "bot"
        plan = (await operator.call_tool("reversi.plan_rollback", {"run_id": "run_web"})).structured_content
        assert [a["kind"] for a in plan["actions"]] == ["unmanifested", "unmanifested"]
        halted = await operator.call_tool("reversi.halt", {"reason": "no"})
        assert halted.is_error and "admin key" in halted.content[0].text  # type: ignore[union-attr]
    async with connect(operator_url, _bearer(elsewhere)) as confined:  # an operator of another tenant
        assert (await confined.call_tool("reversi.list_runs", {})).structured_content == {"runs": []}
        for tool in ("reversi.plan_rollback", "reversi.execute_rollback"):
            refused = await confined.call_tool(tool, {"run_id": "run_web"})
            assert refused.is_error and refused.content[0].text == "run_web belongs to another principal"  # type: ignore[union-attr]
    assert [c["tool"] for c in shop.calls()] == ["create_order", "echo", "echo", "echo"]


async def test_an_admin_confined_to_a_tenant_halts_and_resumes_only_that_tenant(
    tmp_path: Path, shop: Shop, serve: Callable[..., str]
) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    with reversi.open(db) as ledger:
        acme = create_key(ledger.store, "acme-admin", "admin", "acme")[1]
        everyone = ledger.add_halt("everyone's", by="root")
    base = serve("--upstream", shop.flag(), "--db", db)
    async with connect(f"{base}/operator/mcp", _bearer(acme)) as operator:
        halt = (await operator.call_tool("reversi.halt", {"reason": "drill"})).structured_content
        assert halt["scope"] == {"tenant": "acme"}
        assert (await operator.call_tool("reversi.resume", {})).structured_content == {"lifted": 1}
    with reversi.open(db) as ledger:
        assert [h.halt_id for h in ledger.halts()] == [everyone.halt_id]


async def test_without_keys_loopback_clients_act_as_local(
    tmp_path: Path, shop: Shop, serve: Callable[..., str]
) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    base = serve("--upstream", shop.flag(), "--db", db)
    async with connect(f"{base}/mcp", {"Reversi-Run-Id": "run_local"}) as agent:
        await agent.call_tool("echo", {"text": "hi"})
    async with connect(f"{base}/operator/mcp", {}) as operator:
        halt = (await operator.call_tool("reversi.halt", {"reason": "drill"})).structured_content
        assert halt["reason"] == "drill"
        assert (await operator.call_tool("reversi.resume", {})).structured_content == {"lifted": 1}
    with reversi.open(db) as ledger:
        assert ledger.get_run("run_local").principal == "local"
    refused = subprocess.run(
        [str(GATEWAY), "--http", "0.0.0.0:0", "--upstream", shop.flag(), "--db", db],
        capture_output=True, text=True, timeout=WAIT_S, check=False,
    )
    assert refused.returncode == 1 and "refusing to serve 0.0.0.0 with no keys" in refused.stderr


async def test_an_http_agent_that_disconnects_mid_call_leaves_a_step_that_is_never_lost(
    tmp_path: Path, shop: Shop, serve: Callable[..., str]
) -> None:
    """Over HTTP the gateway outlives its agent: the call runs on, and its real outcome is journaled."""
    db = f"sqlite:///{tmp_path}/r.db"
    base = serve("--upstream", shop.flag(), "--db", db)
    async with anyio.create_task_group() as tg:

        async def agent_session() -> None:
            async with connect(f"{base}/mcp", {"Reversi-Run-Id": "run_gone"}) as agent:
                await agent.call_tool("wait", {"key": "h"})

        tg.start_soon(agent_session)
        await until(lambda: shop.started("h"), "the upstream to start the call")
        tg.cancel_scope.cancel()  # the agent hangs up: its HTTP connection closes with the call in flight

    def steps() -> list[dict[str, Any]]:
        with reversi.open(db) as ledger:
            return [s.to_dict() for s in ledger.get_run("run_gone").steps()]

    assert [s["status"] for s in steps()] == ["intended"]  # in flight: unresolved, in every plan
    shop.release("h")
    settled = await until(lambda: [s for s in steps() if s["status"] != "intended"], "the outcome")
    assert settled[0]["status"] == "succeeded" and settled[0]["result"] == {"released": "h"}


async def test_asking_for_progress_over_http_gets_the_answer_without_it(
    tmp_path: Path, shop: Shop, serve: Callable[..., str]
) -> None:
    base = serve("--upstream", shop.flag(), "--db", f"sqlite:///{tmp_path}/r.db")
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with connect(f"{base}/mcp", {"Reversi-Run-Id": "run_http_progress"}) as agent:
        answered = await agent.call_tool("slow", {"parts": 2}, progress_callback=on_progress)
    assert answered.structured_content == {"parts": 2}
    assert seen == []  # /mcp answers each request with one JSON body: no stream to carry notifications on


async def test_a_remote_client_is_401_once_the_store_holds_no_keys(tmp_path: Path) -> None:
    """As the server answers it: a store without keys serves loopback clients only (the gateway
    refuses to bind elsewhere without keys, but it may sit behind a proxy on this machine)."""
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        guard = _Guard(ledger, Role.AGENT)
        guard.app = PlainTextResponse("served")
        for client, status in ((("10.1.2.3", 5000), 401), (("127.0.0.1", 5000), 200)):
            transport = httpx.ASGITransport(app=guard, client=client)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
                answer = await http.post("/mcp", json={})
            assert answer.status_code == status, answer.text
            if status == 401:
                assert answer.json()["error"]["message"].endswith(
                    "it serves loopback clients only, addressed as this machine and not sent by another site's page")


async def test_metrics_count_calls_by_outcome_refusals_by_reason_and_upstream_health(
    tmp_path: Path, shop: Shop, serve: Callable[..., str]
) -> None:
    base = serve("--upstream", shop.flag(), "--db", f"sqlite:///{tmp_path}/r.db")
    async with connect(f"{base}/mcp", {"Reversi-Run-Id": "run_metrics"}) as agent:
        await agent.call_tool("echo", {"text": "one"})
        await agent.call_tool("echo", {"text": "two"})
        await agent.call_tool("fail", {})
        async with connect(f"{base}/operator/mcp", {}) as operator:
            await operator.call_tool("reversi.halt", {"reason": "drill"})
            assert (await agent.call_tool("echo", {"text": "stopped"})).is_error
            await operator.call_tool("reversi.resume", {})
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        answer = await http.get(f"{base}/metrics")  # no key needed, as for /healthz
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }
    assert samples[("reversi_gateway_calls_total", (("outcome", "succeeded"),))] == 2
    assert samples[("reversi_gateway_calls_total", (("outcome", "failed"),))] == 1
    assert samples[("reversi_refusals_total", (("reason", "halted"),))] == 1
    assert samples[("reversi_gateway_tool_call_duration_seconds_count", (("upstream", "shop"),))] == 4
    assert samples[("reversi_gateway_upstream_up", (("upstream", "shop"),))] == 1
    assert samples[("reversi_gateway_upstream_tools", (("upstream", "shop"),))] == 11
    assert samples[("reversi_gateway_upstream_restarts_total", (("upstream", "shop"),))] == 0
