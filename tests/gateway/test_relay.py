"""Which agent an upstream's own request (sampling, elicitation, roots) is asked of: the one with a
request in flight on that upstream, never a guess between two."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types
from mcp.server import ServerRequestContext
from starlette.requests import Request

from reversi.gateway.relay import Relay

pytestmark = pytest.mark.anyio
ROOTS = types.ListRootsRequest()


class _Session:
    def __init__(self, name: str) -> None:
        self.name = name
        self.asked: list[str] = []

    async def send_request(self, request: Any, result_type: Any) -> Any:
        self.asked.append(request.method)
        return types.ListRootsResult(roots=[types.Root(uri=f"file:///{self.name}")])  # type: ignore[arg-type]


def _ctx(session: _Session, http_session: str | None, version: str = "2025-11-25") -> ServerRequestContext[Any, Any]:
    request = None
    if http_session is not None:
        request = Request({"type": "http", "headers": [(b"mcp-session-id", http_session.encode())]})
    return ServerRequestContext(session=session, lifespan_context=None, protocol_version=version,  # type: ignore[arg-type]
                                method="tools/call", request=request)


async def test_over_http_the_session_with_a_call_in_flight_is_asked_and_two_at_once_are_not() -> None:
    relay = Relay(one_agent=False, wait_s=0.1)
    ada, bob = _Session("ada"), _Session("bob")
    with relay.calling("up", _ctx(ada, "s1")):
        answered = await relay.ask("up", ROOTS, types.ListRootsResult)
        assert str(answered.roots[0].uri) == "file:///ada"
        with relay.calling("up", _ctx(bob, "s2")):
            refused = await relay.ask("up", ROOTS, types.ListRootsResult)
        with relay.calling("other", _ctx(bob, "s2")):  # a call on another upstream does not count
            assert str((await relay.ask("up", ROOTS, types.ListRootsResult)).roots[0].uri) == "file:///ada"
    assert isinstance(refused, types.ErrorData) and refused.code == -32601
    assert "several agents" in refused.message
    idle = await relay.ask("up", ROOTS, types.ListRootsResult)  # nobody calling: nobody asked
    assert isinstance(idle, types.ErrorData) and ada.asked == ["roots/list", "roots/list"] and bob.asked == []


async def test_on_stdio_the_agent_is_asked_between_calls_unless_it_speaks_2026() -> None:
    relay = Relay(one_agent=True, wait_s=5)
    agent = _Session("agent")
    relay.seen(_ctx(agent, None))
    assert str((await relay.ask("up", ROOTS, types.ListRootsResult)).roots[0].uri) == "file:///agent"

    stateless = Relay(one_agent=True, wait_s=5)
    stateless.seen(_ctx(_Session("modern"), None, version="2026-07-28"))
    refused = await stateless.ask("up", ROOTS, types.ListRootsResult)
    assert isinstance(refused, types.ErrorData) and "2026-07-28" in refused.message


async def test_over_http_a_2026_agent_with_a_call_in_flight_is_told_why_it_cannot_be_asked() -> None:
    relay = Relay(one_agent=False, wait_s=0.1)
    with relay.calling("up", _ctx(_Session("modern"), None, version="2026-07-28")):
        refused = await relay.ask("up", ROOTS, types.ListRootsResult)
    assert isinstance(refused, types.ErrorData)
    assert refused.message == "roots/list not relayed: the agent speaks MCP 2026-07-28, which has no requests from " \
                              "server to client"
    idle = await relay.ask("up", ROOTS, types.ListRootsResult)  # once it is done: nobody has a call in flight
    assert isinstance(idle, types.ErrorData) and "no agent has a request in flight" in idle.message


async def test_a_session_agent_is_not_asked_while_a_stateless_agent_also_has_a_call_on_the_upstream() -> None:
    """The question may be the stateless agent's call's: asking the session agent could hand another
    tenant's roots (or a sampling or an elicitation) to the wrong call."""
    relay = Relay(one_agent=False, wait_s=0.1)
    ada = _Session("tenant-a")
    with relay.calling("up", _ctx(ada, "s1")), relay.calling("up", _ctx(_Session("b"), None, version="2026-07-28")):
        refused = await relay.ask("up", ROOTS, types.ListRootsResult)
    assert isinstance(refused, types.ErrorData) and "several agents" in refused.message
    assert ada.asked == []
