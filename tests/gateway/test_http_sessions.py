"""MCP sessions on `reversi-gateway --http` belong to the key that opened them, on `/mcp` and
`/operator/mcp` alike; abandoned ones expire and the gateway forgets them; a request cut off
mid-body, or a client that goes away, leaves no traceback (issue #24, finding 4 and item 8)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from tests.gateway.conftest import GATEWAY, WAIT_S, Shop, until
from tests.gateway.http_wire import GatewayProcess, mcp_request
from tests.gateway.session_wire import (
    ACCEPT,
    CALLS,
    Keys,
    cut_off,
    gauge,
    headers,
    json_body,
    make_keys,
    open_session,
    tool_call,
)

import reversi

pytestmark = pytest.mark.anyio
ENDPOINTS = ["/mcp", "/operator/mcp"]


class Gateway:
    """`reversi-gateway --http` over the test upstream, with keys of two agents and two operators."""

    def __init__(self, db: str, shop: Shop, log: Path, *flags: str) -> None:
        self.db, self.shop = db, shop
        self.keys: Keys = make_keys(db)
        self.process = GatewayProcess(["--upstream", shop.flag(), "--db", db, *flags], log)
        self.base = self.process.url

    def stopped_saying(self) -> list[str]:
        """Stop the gateway; everything it said on stderr."""
        self.process.stop()
        said = list(self.process.said)
        while (line := self.process.lines.get(timeout=WAIT_S)) is not None:
            said.append(line)
        return said


@pytest.fixture
def gw(db_url: str, shop: Shop, tmp_path: Path) -> Iterator[Gateway]:
    started = Gateway(db_url, shop, tmp_path / "gateway.log")
    yield started
    started.process.stop()


@asynccontextmanager
async def sdk_session(url: str, key: str, *, terminate: bool = True) -> AsyncIterator[tuple[Client, list[str]]]:
    """The official client on a handshake session opened with `key`; the session id it was given."""
    ids: list[str] = []

    async def note(response: httpx2.Response) -> None:
        if (found := response.headers.get("mcp-session-id")) and found not in ids:
            ids.append(found)

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=WAIT_S,
                           event_hooks={"response": [note]}) as http,
        Client(streamable_http_client(url, http_client=http, terminate_on_close=terminate), cache=None,
               mode="legacy") as client,
    ):
        assert client.protocol_version < "2026" and ids
        yield client, ids


def settled(db: str, tool: str) -> bool:
    with reversi.open(db) as ledger:
        return any(s.tool == tool and s.status.value != "intended"
                   for r in ledger.list_runs() for s in ledger.get_run(r.run.run_id).steps())


async def call(client: Client, endpoint: str, text: str) -> CallToolResult:
    """What `endpoint` is asked in a session, through the official client (the text goes in an echo)."""
    params = CALLS[endpoint](text)["params"]
    return await client.call_tool(params["name"], params["arguments"])


@pytest.mark.parametrize("endpoint", ENDPOINTS)
async def test_another_key_holding_a_session_id_can_neither_call_in_it_nor_end_it(gw: Gateway, endpoint: str) -> None:
    url = gw.base + endpoint
    owner, intruder = gw.keys.of(endpoint)
    async with sdk_session(url, owner) as (client, ids), httpx.AsyncClient(timeout=WAIT_S) as raw:
        assert not (await call(client, endpoint, "owner-1")).is_error
        unknown = await raw.post(url, headers=headers(intruder, uuid.uuid4().hex), json=CALLS[endpoint]("x"))
        assert unknown.status_code == 404
        called = await raw.post(url, headers=headers(intruder, ids[0]), json=CALLS[endpoint]("intruder"))
        ended = await raw.delete(url, headers=headers(intruder, ids[0]))
        # Answered as a session that does not exist: nothing tells the intruder that it does.
        assert (called.status_code, called.text) == (unknown.status_code, unknown.text)
        assert ended.status_code == 404
        assert not (await call(client, endpoint, "owner-2")).is_error
    if endpoint == "/mcp":
        with reversi.open(gw.db) as ledger:
            steps = [(r.run.principal, s.args.get("text")) for r in ledger.list_runs()
                     for s in ledger.get_run(r.run.run_id).steps()]
        assert sorted(steps) == [("alice", "owner-1"), ("alice", "owner-2")]
        assert [c["arguments"]["text"] for c in gw.shop.calls("echo")] == ["owner-1", "owner-2"]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_another_key_cannot_take_a_sessions_event_stream(gw: Gateway, endpoint: str) -> None:
    url = gw.base + endpoint
    owner, intruder = gw.keys.of(endpoint)
    with httpx.Client(timeout=WAIT_S) as http:
        session = open_session(http, url, owner)
        with (
            http.stream("GET", url, headers=headers(intruder, session)) as taken,
            http.stream("GET", url, headers=headers(owner, session)) as own,
        ):
            assert taken.status_code == 404
            assert own.status_code == 200 and own.headers["content-type"].startswith("text/event-stream")


async def test_abandoned_sessions_expire_and_the_gateway_forgets_them(db_url: str, shop: Shop, tmp_path: Path) -> None:
    gw = Gateway(db_url, shop, tmp_path / "gateway.log", "--session-idle-timeout", "3")
    try:
        ids: dict[str, list[str]] = {endpoint: [] for endpoint in ENDPOINTS}
        # A connected client keeps its session: its standing GET stream is a request in flight.
        async with sdk_session(gw.base + "/mcp", gw.keys.of("/mcp")[1]) as (connected, _):
            async with AsyncExitStack() as stack:
                for endpoint in ENDPOINTS:
                    for n in range(3):  # hung up on without a DELETE
                        client, said = await stack.enter_async_context(
                            sdk_session(gw.base + endpoint, gw.keys.of(endpoint)[0], terminate=False))
                        assert not (await call(client, endpoint, f"left-{n}")).is_error
                        ids[endpoint].append(said[0])
                assert gauge(gw.base) == {"/mcp": 4, "/operator/mcp": 3}
            await until(lambda: gauge(gw.base) == {"/mcp": 1, "/operator/mcp": 0}, "the abandoned sessions to end")
            assert not (await call(connected, "/mcp", "bob")).is_error
        await until(lambda: gauge(gw.base) == {"/mcp": 0, "/operator/mcp": 0}, "the DELETE to end the last")
        async with httpx.AsyncClient(timeout=WAIT_S) as raw:
            for endpoint, sessions in ids.items():
                for session in sessions:
                    gone = await raw.post(gw.base + endpoint, headers=headers(gw.keys.of(endpoint)[0], session),
                                          json=CALLS[endpoint]("late"))
                    assert gone.status_code == 404
        said = gw.stopped_saying()
        assert not [line for line in said if "Traceback" in line], said
    finally:
        gw.process.stop()


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "86401", "soon"])
def test_a_bad_session_idle_timeout_stops_the_gateway_with_one_line(tmp_path: Path, shop: Shop, value: str) -> None:
    done = subprocess.run(
        [str(GATEWAY), "--http", "127.0.0.1:0", "--upstream", shop.flag(), "--db", f"sqlite:///{tmp_path}/r.db",
         "--session-idle-timeout", value],
        capture_output=True, text=True, timeout=WAIT_S, check=False, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("reversi-gateway: error: "), done.stderr
    assert "--session-idle-timeout" in done.stderr


async def test_a_request_cut_off_or_abandoned_leaves_at_most_a_line_and_no_traceback(gw: Gateway) -> None:
    """Unauthenticated, the answer (401) comes before the body is read; admitted, a body that never
    ends, a call the client hangs up on and a stream it closes leave nothing to see on stderr."""
    call = json_body(tool_call("echo", {"text": "never"}))
    cuts = 0
    for endpoint in ENDPOINTS:
        owner = gw.keys.of(endpoint)[0]
        refused = cut_off(gw.base, endpoint, ACCEPT, call, 10, answered=True)
        assert refused.startswith(b"HTTP/1.1 401 "), refused
        with httpx.Client(timeout=WAIT_S) as http:
            session = open_session(http, gw.base + endpoint, owner)
        modern, body = mcp_request("tools/call", {"name": "echo", "arguments": {"text": "never"}})
        for head, sent in (
            ({**ACCEPT, "Authorization": f"Bearer {owner}"}, call),  # an opening request
            (headers(owner, session), call),  # in a session
            ({**modern, "Authorization": f"Bearer {owner}"}, json_body(body)),  # stateless 2026
        ):
            cut_off(gw.base, endpoint, head, sent, len(sent) // 2, answered=False)
            cuts += 1
    alice = gw.keys.of("/mcp")[0]
    with httpx.Client(timeout=WAIT_S) as http:
        session = open_session(http, gw.base + "/mcp", alice)
        with http.stream("GET", gw.base + "/mcp", headers=headers(alice, session)) as stream:
            assert stream.status_code == 200  # then closed from this side
    # A call hung up on while the upstream works on it.
    async with httpx.AsyncClient(timeout=WAIT_S) as raw, anyio.create_task_group() as tg:
        tg.start_soon(lambda: raw.post(gw.base + "/mcp", headers=headers(alice, session),
                                       json=tool_call("wait", {"key": "gone"})))
        await until(lambda: gw.shop.started("gone"), "the upstream to start the call")
        tg.cancel_scope.cancel()
    gw.shop.release("gone")
    await until(lambda: settled(gw.db, "wait"), "the call's outcome to be journaled")
    said = gw.stopped_saying()
    started = next(i for i, line in enumerate(said) if line.startswith("reversi-gateway: serving "))
    after = said[started + 1:]
    assert not [line for line in after if "Traceback" in line or line.startswith(" ")], said
    assert len(after) <= cuts, after
