"""The agent's side: an MCP server that re-exposes the upstreams' tools and journals every call.

Each `tools/call` goes refusal checks → `intended` (durable) → the upstream, under the call
timeout → `succeeded`, `failed` or `uncertain` → the upstream's answer, exactly as it came.
Resources, prompts and completions pass through unjournaled: they have no side effect to undo.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import anyio
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from reversi.core.models import RunRecord, StepStatus
from reversi.engine import tracing
from reversi.engine.ledger import Ledger
from reversi.errors import Refused, ReversiError
from reversi.gateway.metrics import GatewayMetrics
from reversi.gateway.results import error_text, from_error, is_error, result_value, tool_error
from reversi.gateway.upstream import Route, Upstream, UpstreamLost, UpstreamPool, UpstreamUnavailable

log = logging.getLogger("reversi.gateway")

RunFor = Callable[[ServerRequestContext[Any, Any]], Awaitable[RunRecord]]
"""Which run a request's calls belong to (raises a ReversiError when it may not have one)."""

_IDENTITY = ("name", "version", "title", "description", "website_url", "icons")  # of the server info
_PROGRESS_TOKEN = ("progressToken", "progress_token")  # on the wire; as the SDK's model names it
_ENVELOPE = "io.modelcontextprotocol/"
_NOT_THE_AGENTS = (_ENVELOPE, "reversi/")


def forward_meta(meta: Mapping[str, Any] | None) -> types.RequestParamsMeta | None:
    """The agent's `_meta` without what belongs to its own connection (protocol envelope, progress
    token) or to Reversi (`reversi/...`: an agent must not pass off a call as a rollback's
    compensation, whose idempotency key an upstream trusts)."""
    kept = {
        k: v
        for k, v in (meta or {}).items()
        if not k.startswith(_NOT_THE_AGENTS) and k not in _PROGRESS_TOKEN
    }
    return cast(types.RequestParamsMeta, kept) if kept else None


def _without_envelope(result: dict[str, Any]) -> dict[str, Any]:
    """An upstream's result without its own protocol envelope in `_meta` (it names the upstream, not
    the gateway the agent talks to)."""
    meta = result.get("_meta")
    if not isinstance(meta, dict) or not any(k.startswith(_ENVELOPE) for k in meta):
        return result
    kept = {k: v for k, v in meta.items() if not k.startswith(_ENVELOPE)}
    return {k: v for k, v in result.items() if k != "_meta"} | ({"_meta": kept} if kept else {})


def _progress_relay(ctx: ServerRequestContext[Any, Any], meta: Mapping[str, Any] | None) -> ProgressFnT | None:
    """When the agent asked for progress, a callback that reports the upstream's to it under its own token."""
    if not meta or all(meta.get(key) is None for key in _PROGRESS_TOKEN):
        return None

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await ctx.session.report_progress(progress, total, message)

    return relay


class Proxy:
    """Journals and forwards tool calls for the runs `run_for` assigns."""

    def __init__(
        self,
        pool: UpstreamPool,
        ledger: Ledger,
        run_for: RunFor,
        call_timeout: float,
        metrics: GatewayMetrics | None = None,
    ) -> None:
        self.pool = pool
        self.ledger = ledger
        self.run_for = run_for
        self.call_timeout = call_timeout
        self.metrics = metrics or GatewayMetrics(pool)
        self._owners: dict[tuple[str, str], Upstream] = {}
        self._calls = 0  # tools/call being answered

    def _alone(self) -> bool:
        """Whether one tool call is being answered: its journal writes then need no group commit."""
        return self._calls <= 1

    # -- tools -----------------------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        await self.pool.refresh_tools(self.call_timeout)  # upstreams may add or drop tools while they run
        return types.ListToolsResult(tools=self.pool.tools())

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | dict[str, Any]:
        route = self.pool.route(params.name)
        if route is None or not await self._offered(route):  # nothing journaled: no call was made
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
        self._calls += 1
        start = time.perf_counter()
        try:
            return await self._call_tool(ctx, params, route)
        finally:
            self._calls -= 1
            self.metrics.answered(route.upstream.name, time.perf_counter() - start)

    async def _offered(self, route: Route) -> bool:
        """Whether the upstream offers the tool (asked again once if not: it may have added it). An
        upstream not connected gets the call, which is journaled `failed` as never sent."""
        if not route.upstream.connected or any(t.name == route.tool for t in route.upstream.tools):
            return True
        await route.upstream.refresh_tools(self.call_timeout)
        return any(t.name == route.tool for t in route.upstream.tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, route: Route
    ) -> types.CallToolResult | dict[str, Any]:
        arguments = params.arguments or {}
        try:
            run = await self.run_for(ctx)
            with tracing.remote_parent((params.meta or {}).get("traceparent")):  # the agent's trace id, journaled
                step = await self.ledger.abegin(run, params.name, arguments, alone=self._alone)
        except ReversiError as exc:
            if isinstance(exc, Refused):
                self.metrics.refusal(exc.code)
            return from_error(exc)
        meta = forward_meta(params.meta)
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=route.tool, arguments=params.arguments, _meta=meta)
        )
        try:
            raw = await route.upstream.request(request, self.call_timeout, _progress_relay(ctx, params.meta))
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                return await self._settle_failure(run, step, route.upstream, exc)
        if is_error(raw):
            await self._journal(run, step, StepStatus.FAILED, error=error_text(raw))
        else:
            await self._journal(run, step, StepStatus.SUCCEEDED, result=result_value(raw))
        return _without_envelope(raw)

    async def _settle_failure(
        self, run: RunRecord, step: int, upstream: Upstream, exc: BaseException
    ) -> types.CallToolResult:
        """Journal a call that got no answer, and say what happened; JSON-RPC errors and cancellation re-raise."""
        where = f"step {step} of {run.run_id}"
        if isinstance(exc, MCPError):
            await self._journal(run, step, StepStatus.FAILED, error=f"{exc.code}: {exc.message}")
            raise exc
        if isinstance(exc, UpstreamUnavailable):
            await self._journal(run, step, StepStatus.FAILED, error=f"{exc}; the call was not sent")
            return tool_error(f"{exc}; the call was not sent ({where} failed)")
        if isinstance(exc, TimeoutError):
            message = f"upstream {upstream.name} did not answer within {self.call_timeout:g} s"
        elif isinstance(exc, UpstreamLost):
            message = str(exc)
        elif isinstance(exc, anyio.get_cancelled_exc_class()):
            await self._journal(run, step, StepStatus.UNCERTAIN, error="the call was cancelled before it answered")
            raise exc
        elif isinstance(exc, Exception):
            message = f"upstream {upstream.name}: {type(exc).__name__}: {exc}"
        else:
            await self._journal(run, step, StepStatus.UNCERTAIN, error=f"interrupted: {type(exc).__name__}")
            raise exc
        await self._journal(run, step, StepStatus.UNCERTAIN, error=message)
        return tool_error(f"{message}: its effect is unknown ({where} is uncertain)")

    async def _journal(
        self, run: RunRecord, step: int, status: StepStatus, *, result: Any = None, error: str | None = None
    ) -> None:
        try:
            await self.ledger.aoutcome(run, step, status, result=result, error=error, alone=self._alone)
            self.metrics.outcome(status.value)
        except ReversiError as exc:  # the step stays `intended`: unresolved, never lost
            log.error("could not journal the outcome of step %s of %s: %s", step, run.run_id, exc.message)

    # -- everything else passes through ----------------------------------------------------------

    async def _forward(self, upstream: Upstream, request: Any) -> dict[str, Any]:
        try:
            return await upstream.request(request, self.call_timeout)
        except (UpstreamUnavailable, UpstreamLost, TimeoutError) as exc:
            raise MCPError(-32603, str(exc) or f"upstream {upstream.name} did not answer") from exc

    async def _list(self, capability: str, field: str, key: str, make: Callable[[Any], Any], cursor: Any) -> Any:
        upstreams = self.pool.with_capability(capability)
        if len(upstreams) == 1:
            return await self._forward(upstreams[0], make(types.PaginatedRequestParams(cursor=cursor)))
        merged: list[Any] = []
        for upstream in upstreams:
            page = await self._forward(upstream, make(types.PaginatedRequestParams()))
            for item in page.get(field) or ():
                self._owners[(capability, str(item.get(key)))] = upstream
                merged.append(item)
        return {field: merged}

    def _owner(self, capability: str, key: str) -> Upstream:
        upstreams = self.pool.with_capability(capability)
        if not upstreams:
            raise MCPError(-32601, "Method not found")
        return self._owners.get((capability, key), upstreams[0])

    async def list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        cursor = params.cursor if params else None
        return await self._list("resources", "resources", "uri", lambda p: types.ListResourcesRequest(params=p), cursor)

    async def list_resource_templates(self, ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        cursor = params.cursor if params else None
        return await self._list(
            "resources",
            "resourceTemplates",
            "uriTemplate",
            lambda p: types.ListResourceTemplatesRequest(params=p),
            cursor,
        )

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        clean = params.model_copy(update={"meta": forward_meta(params.meta)})
        return await self._forward(self._owner("resources", str(params.uri)), types.ReadResourceRequest(params=clean))

    async def list_prompts(self, ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        cursor = params.cursor if params else None
        return await self._list("prompts", "prompts", "name", lambda p: types.ListPromptsRequest(params=p), cursor)

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> Any:
        clean = params.model_copy(update={"meta": forward_meta(params.meta)})
        return await self._forward(self._owner("prompts", params.name), types.GetPromptRequest(params=clean))

    async def complete(self, ctx: Any, params: types.CompleteRequestParams) -> Any:
        clean = params.model_copy(update={"meta": forward_meta(params.meta)})
        upstreams = self.pool.with_capability("completions")
        if not upstreams:
            raise MCPError(-32601, "Method not found")
        return await self._forward(upstreams[0], types.CompleteRequest(params=clean))

    def server(self) -> Server[Any]:
        """The low-level server: the first upstream's identity, and only the capabilities some upstream has."""
        first = self.pool.upstreams[0]
        info = first.server_info if len(self.pool.upstreams) == 1 else None
        identity: dict[str, Any] = {"name": "reversi-gateway"}
        if info is not None:  # one upstream: the agent sees it as it is
            identity = {k: v for k, v in info if k in _IDENTITY}
            identity["instructions"] = first.instructions
        server: Server[Any] = Server(
            **identity,
            get_tool_input_schema=self.pool.input_schema,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,  # type: ignore[arg-type]  # upstream results pass through raw
        )
        passthrough: list[tuple[str, str, type[Any], Any]] = [
            ("resources", "resources/list", types.PaginatedRequestParams, self.list_resources),
            ("resources", "resources/templates/list", types.PaginatedRequestParams, self.list_resource_templates),
            ("resources", "resources/read", types.ReadResourceRequestParams, self.read_resource),
            ("prompts", "prompts/list", types.PaginatedRequestParams, self.list_prompts),
            ("prompts", "prompts/get", types.GetPromptRequestParams, self.get_prompt),
            ("completions", "completion/complete", types.CompleteRequestParams, self.complete),
        ]
        for capability, method, params_type, handler in passthrough:
            if self.pool.with_capability(capability):
                server.add_request_handler(method, params_type, handler)
        server.middleware = []  # no tracing span per message: the journal is the record
        return server
