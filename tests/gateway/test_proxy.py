"""The gateway on stdio in front of real upstream MCP servers: tools re-exposed unchanged, every call
journaled, results and errors passed back exactly as they came, everything else passed through."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import types
from mcp.shared.exceptions import MCPError
from tests.gateway.conftest import Shop, direct, gateway

import reversi
from reversi.gateway.upstream import _connection_closed

pytestmark = pytest.mark.anyio
PROMPT_REF = types.PromptReference(type="ref/prompt", name="greet")


def _dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def _steps(db: str, run_id: str) -> list[dict[str, Any]]:
    with reversi.open(db) as ledger:
        return [s.to_dict() for s in ledger.get_run(run_id).steps()]


async def test_calls_are_journaled_and_answered_exactly_as_the_upstream_answers(db_url: str, shop: Shop) -> None:
    async with direct(shop) as plain:
        want_info = _dump(plain.server_info)
        want_capabilities = _dump(plain.server_capabilities)
        want_tools = _dump(await plain.list_tools())["tools"]
        want_order = _dump(await plain.call_tool("create_order", {"order_id": "d1", "amount": 5}))
        want_resources = _dump(await plain.list_resources())
        want_read = _dump(await plain.read_resource("memo://greeting"))
        want_prompt = _dump(await plain.get_prompt("greet", {"who": "ada"}))
        want_completion = _dump(await plain.complete(PROMPT_REF, {"name": "who", "value": "a"}))
        with pytest.raises(MCPError) as direct_error:
            await plain.call_tool("rpc_error", {})
    async with gateway("--upstream", shop.flag(), "--db", db_url, "--run-id", "run_proxy") as agent:
        assert agent.server_info is not None and agent.server_info.name == "shop"
        assert _dump(agent.server_info) == want_info
        assert _dump(agent.server_capabilities) == want_capabilities
        assert _dump(await agent.list_tools())["tools"] == want_tools
        assert _dump(await agent.call_tool("create_order", {"order_id": "g1", "amount": 5})) == {
            **want_order,
            "structuredContent": {"id": "ord_g1", "amount": 5, "status": "placed"},
            "content": [{"type": "text", "text": '{"id": "ord_g1", "amount": 5, "status": "placed"}'}],
        }
        assert (await agent.call_tool("echo", {"text": '{"n": 1}'})).content[0].text == '{"n": 1}'  # type: ignore[union-attr]
        await agent.call_tool("echo", {"text": "plain words"})
        failed = await agent.call_tool("fail", {})
        assert failed.is_error and failed.content[0].text == "boom"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as through_gateway:
            await agent.call_tool("rpc_error", {})
        assert _dump(await agent.list_resources()) == want_resources
        assert _dump(await agent.read_resource("memo://greeting")) == want_read
        assert _dump(await agent.get_prompt("greet", {"who": "ada"})) == want_prompt
        assert _dump(await agent.complete(PROMPT_REF, {"name": "who", "value": "a"})) == want_completion
        assert want_completion["completion"]["values"] == ["ada", "alan"]
    assert (through_gateway.value.code, through_gateway.value.message, through_gateway.value.data) == (
        direct_error.value.code,
        direct_error.value.message,
        direct_error.value.data,
    ) == (-32042, "teapot", {"why": "short and stout"})
    steps = _steps(db_url, "run_proxy")
    assert [(s["tool"], s["status"]) for s in steps] == [
        ("create_order", "succeeded"),
        ("echo", "succeeded"),
        ("echo", "succeeded"),
        ("fail", "failed"),
        ("rpc_error", "failed"),
    ]
    assert steps[0]["result"] == {"id": "ord_g1", "amount": 5, "status": "placed"}
    assert steps[0]["args"] == {"order_id": "g1", "amount": 5}
    assert steps[1]["result"] == {"n": 1}
    assert steps[2]["result"] == "plain words"
    assert steps[3]["error"] == "boom"
    assert steps[4]["error"] == "-32042: teapot"


async def test_an_upstream_error_with_the_servers_first_code_is_its_answer_not_a_lost_connection(
    tmp_path: Path, shop: Shop
) -> None:
    """-32000 is also what the SDK says when a connection closes: the gateway must not take an
    upstream's own -32000 for that (and journal `uncertain` with an error of its own)."""
    db = f"sqlite:///{tmp_path}/r.db"
    async with gateway("--upstream", shop.flag(), "--db", db, "--run-id", "run_quota") as agent:
        with pytest.raises(MCPError) as raised:
            await agent.call_tool("server_error", {})
    assert (raised.value.code, raised.value.message) == (-32000, "quota exceeded")
    assert [(s["status"], s["error"]) for s in _steps(db, "run_quota")] == [("failed", "-32000: quota exceeded")]


@pytest.mark.parametrize(("message", "lost"), [
    ("Connection closed", True),
    ("SSE stream ended without a response", True),
    ("SSE stream failed: boom", True),
    ("SSE stream ended and reconnection attempts were exhausted", True),
    ("server answered a request with 202 Accepted", True),
    ("quota exceeded", False),
])
def test_the_sdks_own_words_for_a_lost_response_are_told_from_an_upstreams_error(message: str, lost: bool) -> None:
    """An HTTP upstream's stream that ends first also reads -32000: taking it for the upstream's own
    answer would journal `failed` a call that may have run (the plan would then skip it)."""
    assert _connection_closed(MCPError(-32000, message)) is lost
    assert _connection_closed(MCPError(-32000, message, {"detail": 1})) is False  # data: the upstream's


async def test_an_unknown_tool_gets_the_upstreams_own_answer_and_reversi_meta_is_not_the_agents(
    tmp_path: Path, shop: Shop
) -> None:
    """The upstream decides what a tool it does not list is (this one answers -32602; the npm servers
    an `isError` result): the call is asked and journaled like any other."""
    db = f"sqlite:///{tmp_path}/r.db"
    async with gateway("--upstream", shop.flag(), "--db", db, "--run-id", "run_meta") as agent:
        with pytest.raises(MCPError, match="Unknown tool: nosuch"):
            await agent.call_tool("nosuch", {})
        forged = {"reversi/idempotency_key": "what a later rollback will use", "trace": "t-1"}
        await agent.call_tool("echo", {"text": "hi"}, meta=cast(types.RequestParamsMeta, forged))
    assert [(s["tool"], s["status"]) for s in _steps(db, "run_meta")] == [("nosuch", "failed"), ("echo", "succeeded")]
    assert [(c["tool"], c["meta"]) for c in shop.calls()] == [("nosuch", {}), ("echo", {"trace": "t-1"})]


async def test_several_upstreams_are_prefixed_with_their_names(tmp_path: Path, shops: Any) -> None:
    a, b = shops("a"), shops("b")
    db = f"sqlite:///{tmp_path}/r.db"
    async with gateway("--upstream", a.flag(), "--upstream", b.flag(), "--db", db, "--run-id", "run_two") as agent:
        names = [t.name for t in (await agent.list_tools()).tools]
        assert names[:2] == ["a.create_order", "a.cancel_order"] and "b.create_order" in names
        assert agent.server_info is not None  # two upstreams: the gateway speaks as itself, with its version
        assert (agent.server_info.name, agent.server_info.version) == ("reversi-gateway", version("reversi-undo"))
        tool = next(t for t in (await agent.list_tools()).tools if t.name == "b.create_order")
        assert tool.annotations is not None and tool.annotations.title == "Create order"
        answered = _dump(await agent.call_tool("b.echo", {"text": "hi"}))
        envelope = answered.get("_meta", {}).get("io.modelcontextprotocol/serverInfo", {})
        assert envelope.get("name") in (None, "reversi-gateway")  # the agent's server, not upstream b
        for unknown in ("echo", "a."):  # no upstream to ask: answered as the servers answer
            refused = await agent.call_tool(unknown, {})
            assert refused.is_error and refused.content[0].text == f"Unknown tool: {unknown}"  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="Unknown tool: nosuch"):  # upstream a's own answer
            await agent.call_tool("a.nosuch", {})
    assert [c["tool"] for c in a.calls()] == ["nosuch"] and [c["tool"] for c in b.calls()] == ["echo"]
    assert [s["tool"] for s in _steps(db, "run_two")] == ["b.echo", "a.nosuch"]


async def test_upstreams_run_with_the_gateways_environment_and_directory(tmp_path: Path, shop: Shop) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    async with gateway("--upstream", shop.flag(), "--db", db, env={"SHOP_TOKEN": "s3cret"}) as agent:
        seen = (await agent.call_tool("env", {"name": "SHOP_TOKEN"})).structured_content
    assert seen == {"value": "s3cret", "cwd": str(Path.cwd())}


async def test_a_named_run_is_continued_not_restarted(tmp_path: Path, shop: Shop) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    for text in ("one", "two"):
        async with gateway("--upstream", shop.flag(), "--db", db, "--run-id", "run_again") as agent:
            await agent.call_tool("echo", {"text": text})
    assert [s["args"]["text"] for s in _steps(db, "run_again")] == ["one", "two"]
    with reversi.open(db) as ledger:
        types_ = [e.type for e in ledger.get_run("run_again").events()]
    assert types_.count("run_opened") == 1 and types_.count("run_continued") == 1


async def test_older_handshake_clients_are_served_too(tmp_path: Path, shop: Shop) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    async with gateway("--upstream", shop.flag(), "--db", db, "--run-id", "run_old", mode="legacy") as agent:
        assert agent.protocol_version < "2026"
        assert (await agent.call_tool("create_order", {"order_id": "o"})).structured_content["id"] == "ord_o"
        assert types.Tool.model_validate(_dump((await agent.list_tools()).tools[0])).name == "create_order"
    assert _steps(db, "run_old")[0]["status"] == "succeeded"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_upstreams_progress_reaches_the_agent_that_asked_for_it(db_url: str, shop: Shop, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    want = [(1.0, 3.0, "part 1 of 3"), (2.0, 3.0, "part 2 of 3"), (3.0, 3.0, "part 3 of 3")]
    async with direct(shop) as plain:
        await plain.call_tool("slow", {"parts": 3}, progress_callback=on_progress)
    assert seen == want  # what the upstream sends on its own
    seen.clear()
    async with gateway("--upstream", shop.flag(), "--db", db_url, "--run-id", "run_progress", mode=mode) as agent:
        answered = await agent.call_tool("slow", {"parts": 3}, progress_callback=on_progress)
        assert seen == want
        assert answered.structured_content == {"parts": 3}
        await agent.call_tool("slow", {"parts": 2})  # no token asked: nothing relayed, nothing fails
        assert len(seen) == 3
    assert [(s["tool"], s["status"]) for s in _steps(db_url, "run_progress")] == [("slow", "succeeded")] * 2
    # the gateway asks the upstream for progress only when its agent asked for it
    through = shop.calls("slow")[1:]
    assert ["progress_token" in c["meta"] for c in through] == [True, False]  # as the SDK names it


async def test_tools_an_upstream_adds_while_running_are_listed_and_callable(tmp_path: Path, shops: Any) -> None:
    a, b = shops("a"), shops("b")
    async with gateway("--upstream", a.flag(), "--upstream", b.flag(), "--db", f"sqlite:///{tmp_path}/r.db") as agent:
        assert "b.restock" not in [t.name for t in (await agent.list_tools()).tools]
        (b.state / "extra-tools").write_text("restock\n")
        assert "b.restock" in [t.name for t in (await agent.list_tools()).tools]
        answered = await agent.call_tool("b.restock", {})
        assert not answered.is_error and answered.content[0].text == "restock ran"  # type: ignore[union-attr]
        (b.state / "extra-tools").write_text("")
        assert "b.restock" not in [t.name for t in (await agent.list_tools()).tools]


async def test_a_2026_upstream_asking_for_input_is_answered_by_a_2026_agent_and_refused_to_an_older_one(
    tmp_path: Path, shop: Shop
) -> None:
    """`input_required` is no outcome: the step is `uncertain`, and a 2026 agent's call again (with
    its answers, passed up as it sent them) is a step of its own. A handshake agent cannot be asked."""
    from tests.gateway.npm import PythonAgent, through

    db = f"sqlite:///{tmp_path}/r.db"
    upstream = shop.flag().partition("=")[2].split()
    async with PythonAgent().stdio(through(upstream, db, "--run-id", "run_ask"), "auto") as agent:
        answered = await agent.call_tool("ask", {})
    assert answered.structured_content == {"action": "decline", "state": "asked-once"}
    async with PythonAgent().stdio(through(upstream, db, "--run-id", "run_ask"), "legacy") as agent:
        refused = await agent.call_tool("ask", {})
    assert refused.is_error and "input_required" in refused.content[0].text  # type: ignore[union-attr]
    assert [(s["status"], s["error"]) for s in _steps(db, "run_ask")] == [
        ("uncertain", "upstream up asked for input before answering (input_required)"),
        ("succeeded", None),
        ("uncertain", "upstream up asked for input before answering (input_required)"),
    ]
