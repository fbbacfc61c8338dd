"""Requests an upstream makes of its client (sampling, elicitation, roots), asked of the agent.

The gateway tells every upstream it can be asked all three, so a server that chooses its tools by
its client's capabilities offers them all; each request is then asked of the agent whose call is
in flight on that upstream, and its answer (or error) handed back unchanged. Only a handshake
session can be asked anything: the 2026-07-28 revision has no requests from server to client, so a
stateless agent's upstreams are answered `-32601` (as a client without the capability answers).

Which agent: the one session with a request in flight on that upstream; on stdio, where there is
one agent, that agent even between calls (roots are asked when an upstream starts). Over HTTP two
sessions calling the same upstream at once cannot be told apart (the handshake revisions do not tie
a server's request to the client request it serves), so neither is asked: one agent's sampling or
elicitation must never reach another.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from mcp import types
from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types import METHOD_NOT_FOUND
from pydantic import BaseModel
from starlette.requests import Request

from reversi.mcp_results import is_modern

_STDIO = "stdio"


def _agent(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """Which handshake session a request belongs to (None: a stateless 2026 request)."""
    if is_modern(ctx.protocol_version):
        return None
    request = ctx.request
    if isinstance(request, Request):
        return request.headers.get("mcp-session-id")
    return _STDIO


STATELESS = "the agent speaks MCP 2026-07-28, which has no requests from server to client"


def _not_relayed(request: Any, why: str) -> types.ErrorData:
    return types.ErrorData(code=METHOD_NOT_FOUND, message=f"{request.method} not relayed: {why}")


class Relay:
    """The agents' sessions that an upstream's requests can be asked of."""

    def __init__(self, *, one_agent: bool, wait_s: float) -> None:
        self.one_agent = one_agent  # stdio: whoever is connected is the agent
        self.wait_s = wait_s
        self._sessions: dict[str, ServerSession] = {}
        self._busy: dict[str, Counter[str]] = {}  # upstream -> agent -> requests in flight
        self._stateless = False  # stdio: the agent spoke 2026-07-28, which cannot be asked
        self._stateless_busy: Counter[str] = Counter()  # HTTP: upstream -> such agents' requests in flight
        self._joined = anyio.Event()

    def seen(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """Note the session a request came on (on stdio: the agent, from now on); returns its key."""
        key = _agent(ctx)
        if self.one_agent:
            if key is None:
                self._stateless = True
            else:
                self._sessions.setdefault(key, ctx.session)
            self._joined.set()
        return key

    @contextmanager
    def calling(self, upstream: str, ctx: ServerRequestContext[Any, Any]) -> Iterator[None]:
        """While the agent of `ctx` has a request in flight on `upstream`."""
        key = self.seen(ctx)
        if key is None:  # a 2026-07-28 agent: no session to ask, but its call is in flight all the same
            self._stateless_busy[upstream] += 1
            try:
                yield
            finally:
                self._stateless_busy[upstream] -= 1
                if not self._stateless_busy[upstream]:
                    del self._stateless_busy[upstream]
            return
        self._sessions.setdefault(key, ctx.session)
        busy = self._busy.setdefault(upstream, Counter())
        busy[key] += 1
        try:
            yield
        finally:
            busy[key] -= 1
            if not busy[key]:
                del busy[key]
            if not self.one_agent and not any(key in b for b in self._busy.values()):
                self._sessions.pop(key, None)  # over HTTP only a session with a request in flight is asked

    async def _target(self, upstream: str) -> ServerSession | str:
        """The session to ask, or why there is none."""
        busy = self._busy.get(upstream) or Counter()
        if len(busy) + bool(self._stateless_busy[upstream]) > 1:  # a stateless agent's call counts as one more
            return "several agents have requests in flight on this upstream: the gateway cannot tell whose this is"
        if len(busy) == 1:
            return self._sessions[next(iter(busy))]
        if self.one_agent:
            with anyio.move_on_after(self.wait_s):
                await self._joined.wait()
            if not self._stateless and _STDIO in self._sessions:
                return self._sessions[_STDIO]
            if self._stateless:
                return STATELESS
            return "no agent is connected"
        if self._stateless_busy[upstream]:
            return STATELESS
        return "no agent has a request in flight on this upstream"

    async def ask(self, upstream: str, request: Any, result_type: type[BaseModel]) -> Any:
        """`request` asked of the agent: its result, or the error it (or the gateway) answered, as ErrorData."""
        target = await self._target(upstream)
        if isinstance(target, str):
            return _not_relayed(request, target)
        try:
            return await target.send_request(request, result_type)
        except MCPError as exc:
            return types.ErrorData(code=exc.code, message=exc.message, data=exc.data)
        except NoBackChannelError:
            return _not_relayed(request, "no way back to the agent")

    # -- the upstream Client's callbacks ---------------------------------------------------------

    def callbacks(self, upstream: str) -> dict[str, Any]:
        """The `Client` keyword arguments that relay `upstream`'s requests (and declare the capabilities)."""

        async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
            kind = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
            return await self.ask(upstream, types.CreateMessageRequest(params=params), kind)

        async def elicitation(context: Any, params: types.ElicitRequestParams) -> Any:
            return await self.ask(upstream, types.ElicitRequest(params=params), types.ElicitResult)

        async def roots(context: Any) -> Any:
            return await self.ask(upstream, types.ListRootsRequest(), types.ListRootsResult)

        return {
            "sampling_callback": sampling,
            "elicitation_callback": elicitation,
            "list_roots_callback": roots,
        }
