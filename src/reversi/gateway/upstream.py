"""Connections to the upstream MCP servers, each owned by a supervisor task that restarts it when it dies.

A `Client` must be entered and left in one task, so each upstream's client lives in its own
long-lived task; requests from any task go through `Upstream.request`. Whether a request reached
the upstream matters (a lost request never took effect; one in flight when the upstream died may
have), so the supervisor watches the connection's read side and records the moment it ends.

An upstream that cannot start is retried like one that died, but when none of them starts the
gateway has nothing to serve: `UpstreamPool.start` then fails with each one's reason.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

import anyio
from mcp import Client, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from pydantic import TypeAdapter, ValidationError

from reversi.core.calls import CONNECTORS_SERVER
from reversi.core.json_values import LooseJSON, LooseJSONObject
from reversi.core.manifest import ToolEntry
from reversi.core.server_undo import declared_undos
from reversi.errors import ConfigError, UpstreamLost, UpstreamUnavailable
from reversi.gateway.options import UpstreamSpec
from reversi.gateway.relay import Relay
from reversi.gateway.stderr_relay import StderrRelay
from reversi.mcp_results import is_modern

log = logging.getLogger("reversi.gateway")

RAW: Any = TypeAdapter(LooseJSONObject)  # the result as it came, still checked against the protocol
_MAX_BACKOFF_S = 5.0
START_TIMEOUT_S = 60.0  # to connect, initialize and list tools (`npx -y` may download the server first)
# How the SDK (as pinned) words the CONNECTION_CLOSED errors it makes up itself.
_SDK_LOST = frozenset({"Connection closed", "server answered a request with 202 Accepted"})
_SDK_STREAM = "SSE stream "  # "... ended without a response", "... failed: ...", "... reconnection ... exhausted"


class _NotJsonRpcLine(logging.Filter):
    """The SDK logs each stdout line of a server that is not JSON-RPC (a banner, say) with its whole
    traceback; one line says it, without burying what follows."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, ValidationError):
            errors = exc.errors()
            line = errors[0].get("input") if errors else None
            shown = repr(line[:80] + "..." if isinstance(line, str) and len(line) > 80 else line)
            record.msg, record.args = f"an upstream wrote a line to stdout that is not JSON-RPC, skipped: {shown}", ()
            record.exc_info, record.exc_text = None, None
        return True


logging.getLogger("mcp.client.stdio").addFilter(_NotJsonRpcLine())


class _WatchedStream:
    """The read side of a transport, setting `closed` when it ends (no extra hop per message)."""

    def __init__(self, inner: Any, closed: anyio.Event) -> None:
        self._inner = inner
        self._closed = closed

    def __getattr__(self, name: str) -> Any:  # `last_context` and the like
        return getattr(self._inner, name)

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except BaseException:
            self._closed.set()
            raise

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except BaseException:
            self._closed.set()
            raise

    async def aclose(self) -> None:
        self._closed.set()
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@asynccontextmanager
async def _watched(spec: UpstreamSpec, closed: anyio.Event, errlog: TextIO) -> AsyncIterator[tuple[Any, Any]]:
    # With a token, the HTTP client carries it; the SDK leaves a client it is given to us to close.
    http = create_mcp_http_client(headers=spec.headers()) if spec.url is not None and spec.token_env else None
    if spec.url is not None:
        transport: Any = streamable_http_client(spec.url, http_client=http)
    else:
        # The SDK passes only a short list of variables unless told otherwise; upstreams get ours.
        params = StdioServerParameters(
            command=spec.command[0],
            args=list(spec.command[1:]),
            env={**os.environ, **spec.env},
            cwd=spec.cwd or os.getcwd(),
        )
        transport = stdio_client(params, errlog=errlog)
    try:
        async with http if http is not None else contextlib.nullcontext(), transport as (read, write):
            yield _WatchedStream(read, closed), write
    finally:
        closed.set()


@dataclass
class Upstream:
    """One upstream server and what it offers, kept connected by `supervise`."""

    spec: UpstreamSpec
    relay: Relay | None = None  # where the upstream's own requests (sampling, elicitation, roots) go
    tools: list[types.Tool] = field(default_factory=list)
    listed: list[LooseJSONObject] = field(default_factory=list)  # the same tools as the upstream sent them
    protocol_version: str | None = None  # the revision negotiated with it
    server_info: types.Implementation | None = None
    capabilities: types.ServerCapabilities = field(default_factory=types.ServerCapabilities)
    instructions: str | None = None
    last_error: str | None = None
    restarts: int = 0
    start_timeout: float = START_TIMEOUT_S
    has_connected: bool = False
    _stderr: StderrRelay | None = None
    _released: bool = False  # by the pool, once it has said how the start went
    _client: Client | None = None
    _closed: anyio.Event = field(default_factory=anyio.Event)
    _ready: anyio.Event = field(default_factory=anyio.Event)
    _tried: anyio.Event = field(default_factory=anyio.Event)

    @property
    def name(self) -> str:
        return self.spec.name

    @functools.cached_property
    def identity(self) -> dict[str, str]:
        """What the journal keeps of where a call went (`UpstreamSpec.identity`, worked out once)."""
        return self.spec.identity()

    @property
    def wants_steps(self) -> bool:
        """Whether this upstream is a Reversi connector server, which seals results to their step."""
        return self.server_info is not None and self.server_info.name == CONNECTORS_SERVER

    @property
    def connected(self) -> bool:
        return self._client is not None and not self._closed.is_set()

    async def supervise(self) -> None:
        """Connect, serve until the connection ends, and connect again (backing off while it fails).
        A stdio upstream's stderr is passed on (see `release`)."""
        async with anyio.create_task_group() as tg:
            if self.spec.url is None:
                self._stderr = StderrRelay()
                tg.start_soon(self._stderr.run)
            await self._keep_connected()

    async def _keep_connected(self) -> None:
        backoff = 0.1
        while True:
            closed, adopted = anyio.Event(), anyio.Event()
            if self._stderr is not None:
                self._stderr.forget()
            try:
                with anyio.CancelScope() as attempt:
                    async with anyio.create_task_group() as watchdog:
                        watchdog.start_soon(_give_up_unless, adopted, attempt, self.start_timeout)
                        errlog = self._stderr.file if self._stderr is not None else sys.stderr
                        relayed = self.relay.callbacks(self.name) if self.relay is not None else {}
                        async with Client(_watched(self.spec, closed, errlog), cache=None, **relayed) as client:
                            await self._adopt(client, closed)
                            adopted.set()
                            backoff = 0.1
                            await closed.wait()
                            self._mark_down()
                            log.warning("upstream %s: the connection ended; restarting it", self.name)
                if attempt.cancelled_caught:
                    self._failed(f"it did not finish starting within {self.start_timeout:g} s", self._stderr_line())
            except Exception as exc:  # a failed start, a crash: record it and try again
                self._failed(*self._why(exc))
            finally:
                self._mark_down()
                self._tried.set()
            self.restarts += 1
            await anyio.sleep(backoff)
            backoff = min(_MAX_BACKOFF_S, backoff * 2)

    def _failed(self, error: str, stderr_line: str | None = None) -> None:
        self.last_error = f"{error} (its last line on stderr: {stderr_line})" if stderr_line else error
        if self._released:  # until then how the start went is the pool's to say (`UpstreamPool.start`)
            log.warning("upstream %s: %s", self.name, self.last_error)

    def _stderr_line(self) -> str | None:
        return self._stderr.last_line() if self._stderr is not None else None

    def _why(self, exc: BaseException) -> tuple[str, str | None]:
        """What went wrong, and the upstream's last line on stderr where it says more."""
        leaf = _leaf(exc)
        if isinstance(leaf, OSError) and leaf.strerror and self.spec.command and not self.connected:
            return f"{self._unrunnable(leaf)}: {leaf.strerror}", None  # the command could not be run at all
        line = self._stderr_line()
        if isinstance(leaf, MCPError) and _connection_closed(leaf) and self._stderr is not None:
            # it went away: what it said last is the reason, whatever the SDK makes of it
            return (line, None) if line else ("it exited (or closed its stdout) saying nothing on stderr", None)
        return _describe(exc), line

    def _unrunnable(self, exc: OSError) -> str:
        """What could not be run (uvloop does not say, asyncio does): the command, or its directory."""
        if exc.filename is not None:
            return str(exc.filename)
        cwd = self.spec.cwd
        return os.path.normpath(cwd) if cwd is not None and not os.path.isdir(cwd) else self.spec.command[0]

    def release(self) -> None:
        """Say from now on what goes wrong (on stderr), and pass the upstream's stderr on to ours, with
        what it wrote so far."""
        self._released = True
        if self._stderr is not None:
            self._stderr.release()

    def _mark_down(self) -> None:
        self._client = None
        if self._ready.is_set():
            self._ready = anyio.Event()  # callers wait on the next one

    async def _adopt(self, client: Client, closed: anyio.Event) -> None:
        self.tools, self.listed = await _list_tools(client)
        self.protocol_version = client.protocol_version
        self.server_info = client.server_info
        self.capabilities = client.server_capabilities
        self.instructions = client.instructions
        self.last_error = None
        self.has_connected = True
        self._client, self._closed = client, closed
        self._ready.set()
        self._tried.set()

    async def refresh_tools(self, timeout: float) -> None:
        """Read the upstream's tool list again (a server may change it while it runs). When the
        upstream cannot answer, its last known list stays."""
        client = self._client
        if client is None or self._closed.is_set():
            return
        try:
            with anyio.fail_after(timeout):
                self.tools, self.listed = await _list_tools(client)
        except Exception as exc:  # whatever went wrong, the listing goes on with the last known tools
            log.warning("upstream %s: could not list its tools again: %s", self.name, _describe(exc))

    async def notify_roots_changed(self) -> None:
        """Pass the agent's `notifications/roots/list_changed` on (nothing when not connected)."""
        client = self._client
        if client is None or self._closed.is_set() or is_modern(self.protocol_version):
            return
        try:
            await client.session.send_notification(types.RootsListChangedNotification())
        except Exception as exc:  # a notification: nobody waits for it
            log.warning("upstream %s: could not pass on that the roots changed: %s", self.name, _describe(exc))

    async def started(self) -> None:
        """Wait until the first connection attempt has succeeded or failed."""
        await self._tried.wait()

    async def _connected(self, timeout: float) -> tuple[Client, anyio.Event]:
        with anyio.move_on_after(timeout):
            while self._client is None or self._closed.is_set():
                ready = self._ready
                if ready.is_set():
                    await anyio.sleep(0.005)  # the connection just ended: the supervisor is restarting it
                else:
                    await ready.wait()
        client = self._client
        if client is None or self._closed.is_set():
            raise UpstreamUnavailable(
                f"upstream {self.name} is not available" + (f": {self.last_error}" if self.last_error else "")
            )
        return client, self._closed

    async def request(self, request: Any, timeout: float, on_progress: ProgressFnT | None = None) -> LooseJSONObject:
        """Send one request and return the upstream's raw result, as it came; with `on_progress`, ask
        the upstream for progress notifications and hand each one to it.

        Raises:
            UpstreamUnavailable: not connected (after waiting up to `timeout` for it); nothing was sent.
            UpstreamLost: the connection ended with the request in flight.
            TimeoutError: no answer within `timeout` (the request is cancelled upstream).
            MCPError: the upstream answered with a JSON-RPC error.
        """
        client, closed = self._client, self._closed
        if client is None or closed.is_set():  # else connected: no wait, and no cancel scope to set up
            client, closed = await self._connected(timeout)
        with anyio.fail_after(timeout):
            try:
                result = await client.session.send_request(request, RAW, progress_callback=on_progress)
                return cast(LooseJSONObject, result)
            except MCPError as exc:
                if closed.is_set() or _connection_closed(exc):
                    raise UpstreamLost(f"upstream {self.name} went away during the call") from exc
                raise
            except ValidationError as exc:
                raise UpstreamLost(f"upstream {self.name} answered with a malformed result") from exc
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
                raise UpstreamLost(f"upstream {self.name}: transport error: {_describe(exc)}") from exc


async def _give_up_unless(adopted: anyio.Event, attempt: anyio.CancelScope, timeout: float) -> None:
    """End a start that hangs (a server that never answers `initialize`): the gateway waits for each
    upstream's first attempt before it serves."""
    with anyio.move_on_after(timeout):
        await adopted.wait()
        return
    attempt.cancel()


def _connection_closed(exc: MCPError) -> bool:
    """Whether the SDK says the response is lost (the connection closed, or an HTTP upstream's stream
    ended first). -32000 alone does not tell: it is also the first code of the range JSON-RPC leaves
    to servers, which an upstream may answer with itself; the SDK's own messages do."""
    if exc.code != CONNECTION_CLOSED or exc.data is not None:
        return False
    return exc.message in _SDK_LOST or exc.message.startswith(_SDK_STREAM)


async def _list_tools(client: Client) -> tuple[list[types.Tool], list[LooseJSONObject]]:
    """Every page of the upstream's tools (none when it offers no tools), read and as they came."""
    raw: list[LooseJSONObject] = []
    cursor: str | None = None
    if client.server_capabilities.tools is None:
        return [], raw
    while True:
        request = types.ListToolsRequest(params=types.PaginatedRequestParams(cursor=cursor))
        page = await client.session.send_request(request, RAW)
        raw.extend(page.get("tools") or ())
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    # What `session.list_tools` does with a listing, on the raw one: on 2026-07-28 it drops the tools
    # whose x-mcp-header annotations are invalid and learns which arguments later calls mirror into
    # headers (the SDK keeps this per session, privately: no public way to hand it a raw listing).
    listing = types.ListToolsResult(tools=[types.Tool.model_validate(tool) for tool in raw])
    kept = client.session._absorb_tool_listing(listing, complete=True).tools
    names = {tool.name for tool in kept}
    return kept, [tool for tool in raw if tool.get("name") in names]


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    leaf = _leaf(exc)
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


@dataclass(frozen=True)
class Route:
    upstream: Upstream
    tool: str  # the upstream's own name for it


class UpstreamPool:
    """Every upstream, and which one serves a tool (names prefixed `NAME.` when there are several)."""

    def __init__(self, specs: tuple[UpstreamSpec, ...], relay: Relay | None = None) -> None:
        self.relay = relay
        self.upstreams = [Upstream(spec, relay) for spec in specs]
        self.prefixed = len(self.upstreams) > 1
        self._warned: set[str] = set()

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Start every supervisor and wait for each one's first connection attempt (a hung one is
        given up on after its start timeout). Those that failed are said on stderr and tried again.

        Raises:
            ConfigError: none of the upstreams started; the message gives each one's reason.
        """
        for upstream in self.upstreams:
            task_group.start_soon(upstream.supervise)
        for upstream in self.upstreams:
            await upstream.started()
        failed = [u for u in self.upstreams if not u.has_connected]
        if len(failed) == len(self.upstreams):
            raise ConfigError("; ".join(f"upstream {u.name} could not start: {u.last_error}" for u in failed))
        for upstream in self.upstreams:
            upstream.release()
        for upstream in failed:
            log.warning("upstream %s could not start: %s; serving the others, and trying it again",
                        upstream.name, upstream.last_error)

    async def refresh_tools(self, timeout: float) -> None:
        """Every upstream's tool list read again, all at once."""
        async with anyio.create_task_group() as tg:
            for upstream in self.upstreams:
                tg.start_soon(upstream.refresh_tools, timeout)

    def tools(self) -> list[types.Tool]:
        if not self.prefixed:
            return list(self.upstreams[0].tools)
        return [
            tool.model_copy(update={"name": self.public_name(upstream, tool.name)})
            for upstream in self.upstreams
            for tool in upstream.tools
        ]

    def listed_tools(self) -> list[LooseJSONObject]:
        """`tools()` as the upstreams sent them (each tool's JSON unchanged but for a prefixed name)."""
        if not self.prefixed:
            return list(self.upstreams[0].listed)
        return [
            {**tool, "name": self.public_name(upstream, str(tool.get("name")))}
            for upstream in self.upstreams
            for tool in upstream.listed
        ]

    def public_name(self, upstream: Upstream, tool: str) -> str:
        """The name the agent (and the manifests) know `upstream`'s `tool` by."""
        return f"{upstream.name}.{tool}" if self.prefixed else tool

    def route(self, name: str) -> Route | None:
        """The upstream that serves `name`; with one upstream every name goes to it."""
        if not self.prefixed:
            return Route(self.upstreams[0], name)
        prefix, dot, rest = name.partition(".")
        for upstream in self.upstreams:
            if dot and rest and upstream.name == prefix:
                return Route(upstream, rest)
        return None

    def input_schema(self, name: str) -> Mapping[str, LooseJSON] | None:
        route = self.route(name)
        if route is None:
            return None
        for tool in route.upstream.tools:
            if tool.name == route.tool:
                return tool.input_schema
        return None

    def declared_undos(self) -> dict[str, ToolEntry]:
        """The undos declared in the listings of the upstreams the operator takes at their word
        (`server_undo`), as entries by the gateway's tool names; each declaration that cannot be used
        is warned of once."""
        found: dict[str, ToolEntry] = {}
        for upstream in self.upstreams:
            mode = upstream.spec.server_undo
            if mode is None:
                continue
            undos, warnings = declared_undos(upstream.listed, server=upstream.name, approve=mode == "approve",
                                             named=functools.partial(self.public_name, upstream))
            for warning in set(warnings) - self._warned:
                log.warning("%s", warning)
            self._warned.update(warnings)
            found |= {name: undo.entry(name) for name, undo in undos.items()}
        return found

    def with_capability(self, capability: str) -> list[Upstream]:
        return [u for u in self.upstreams if getattr(u.capabilities, capability, None) is not None]
