"""The agent's side: an MCP server that re-exposes the upstreams' tools and journals every call.

Each `tools/call` goes refusal checks → `intended` (durable) → the upstream, under the call
timeout → `succeeded`, `failed` or `uncertain` → the upstream's answer, exactly as it came.
Resources, prompts and completions pass through unjournaled: they have no side effect to undo.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, cast

import anyio
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from reversi.core.calls import CALL_META_KEY
from reversi.core.json_values import LooseJSON, LooseJSONObject
from reversi.core.models import RunRecord, StepStatus
from reversi.distribution import version
from reversi.engine import tracing
from reversi.engine.capture import Captured, take_capture
from reversi.engine.principal_ledger import PrincipalLedger
from reversi.errors import BadInput, CaptureFailed, Refused, ReversiError, UpstreamLost, UpstreamUnavailable
from reversi.gateway.metrics import GatewayMetrics
from reversi.gateway.results import error_text, from_error, is_error, journaled_answer, structured, tool_error
from reversi.gateway.revisions import AsSent, asks_for_input, for_upstream
from reversi.gateway.upstream import Route, Upstream, UpstreamPool
from reversi.gateway.upstream_calls import call_upstream
from reversi.mcp_results import ENVELOPE, exact_results, is_modern, passed_through

log = logging.getLogger("reversi.gateway")

RunFor = Callable[[ServerRequestContext[Any, Any]], Awaitable[RunRecord]]
"""Which run a request's calls belong to (raises a ReversiError when it may not have one)."""
DoorFor = Callable[[ServerRequestContext[Any, Any]], PrincipalLedger]
"""The ledger as the principal of a request may use it (raises a ReversiError when it has none)."""

_IDENTITY = ("name", "version", "title", "description", "website_url", "icons")  # of the server info
_PROGRESS_TOKEN = ("progressToken", "progress_token")  # on the wire; as the SDK's model names it
_NOT_THE_AGENTS = (ENVELOPE, "reversi/")


def forward_meta(meta: Mapping[str, LooseJSON] | None) -> types.RequestParamsMeta | None:
    """The agent's `_meta` without what belongs to its own connection (protocol envelope, progress
    token) or to Reversi (`reversi/...`: an agent must not pass off a call as a rollback's
    compensation, whose idempotency key an upstream trusts)."""
    kept = {
        k: v
        for k, v in (meta or {}).items()
        if not k.startswith(_NOT_THE_AGENTS) and k not in _PROGRESS_TOKEN
    }
    return cast(types.RequestParamsMeta, kept) if kept else None


def _progress_relay(ctx: ServerRequestContext[Any, Any], meta: Mapping[str, LooseJSON] | None) -> ProgressFnT | None:
    """When the agent asked for progress, a callback that reports the upstream's to it under its own token."""
    if not meta or all(meta.get(key) is None for key in _PROGRESS_TOKEN):
        return None

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await ctx.session.report_progress(progress, total, message)

    return relay


CHECKPOINT_TOOL = "reversi.checkpoint"
_CHECKPOINT_LISTING = {
    "name": CHECKPOINT_TOOL,
    "description": "Mark a checkpoint in this session's run: an operator can later undo only what was done "
                   "after it, and keep what came before.",
    "inputSchema": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200}},
                    "required": ["name"], "additionalProperties": False},
}

_LISTINGS: dict[str, Callable[..., Any]] = {
    "resources/list": types.ListResourcesRequest,
    "resources/templates/list": types.ListResourceTemplatesRequest,
    "prompts/list": types.ListPromptsRequest,
}


class Proxy:
    """Journals and forwards tool calls for the runs `run_for` assigns, through the door `door_for` gives
    each request (its principal's)."""

    def __init__(
        self,
        pool: UpstreamPool,
        door_for: DoorFor,
        run_for: RunFor,
        call_timeout: float,
        metrics: GatewayMetrics | None = None,
        *,
        checkpoint_tool: bool = False,
    ) -> None:
        """`checkpoint_tool`: offer the agent `reversi.checkpoint`, journaled in its run, never forwarded."""
        self.pool = pool
        self.door_for = door_for
        self.run_for = run_for
        self.call_timeout = call_timeout
        self.metrics = metrics or GatewayMetrics(pool)
        self._owners: dict[tuple[str, str], Upstream] = {}
        self.checkpoint_tool = checkpoint_tool
        # The upstreams' listings the declared undos were read from: the lists themselves, held, so that a
        # new listing is never taken for one of these (an id alone may be reused once a list is freed).
        self._listings: tuple[list[LooseJSONObject], ...] = ()

    def _declare_undos(self, door: PrincipalLedger) -> None:
        """Give the ledger's manifests the undos the upstreams declare, when a listing changed since."""
        listings = tuple(upstream.listed for upstream in self.pool.upstreams)
        if len(listings) != len(self._listings) or any(a is not b for a, b in zip(listings, self._listings,
                                                                                  strict=True)):
            self._listings = listings
            door.manifests.declare(self.pool.declared_undos())

    # -- tools -----------------------------------------------------------------------------------

    async def list_tools(self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None) -> Any:
        await self.pool.refresh_tools(self.call_timeout)  # upstreams may add or drop tools while they run
        self._declare_undos(self.door_for(ctx))
        ours = [_CHECKPOINT_LISTING] if self.checkpoint_tool else []
        return passed_through("tools/list", {"tools": self.pool.listed_tools() + ours})

    async def call_tool(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        if self.checkpoint_tool and params.name == CHECKPOINT_TOOL:  # ours, before any upstream's of that name
            return await self._checkpoint(ctx, params.arguments or {})
        route = self.pool.route(params.name)
        if route is None:  # no upstream to ask: answered as the servers answer a tool they do not have
            return tool_error(f"Unknown tool: {params.name}")
        start = time.perf_counter()
        try:
            return await self._call_tool(ctx, params, route)
        finally:
            self.metrics.answered(route.upstream.name, time.perf_counter() - start)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, route: Route
    ) -> Any:
        """A tool the upstream does not list is asked too, and journaled like any call: what it
        answers is the agent's answer, and a tool it offers without listing it may have effects."""
        arguments = params.arguments or {}
        try:
            door = self.door_for(ctx)
            self._declare_undos(door)
            run = await self.run_for(ctx)
            before = await self._capture(door, run, params.name, arguments)
            with tracing.remote_parent((params.meta or {}).get("traceparent")):  # the agent's trace id, journaled
                step = await door.abegin_forwarded(
                    run, params.name, arguments, via=route.upstream.identity,
                    before=before,
                )
        except ReversiError as exc:
            if isinstance(exc, Refused):
                self.metrics.refusal(exc.code)
            return from_error(exc)
        upstream = route.upstream
        meta = forward_meta(params.meta)
        if upstream.wants_steps:
            meta = cast(types.RequestParamsMeta, {**(meta or {}), CALL_META_KEY: {"run_id": run.run_id, "step": step}})
        clean = for_upstream(ctx.params, upstream.protocol_version, meta)
        request = AsSent(method="tools/call", params=clean | {"name": route.tool})
        try:
            with self._relaying(upstream, ctx):
                raw = await upstream.request(request, self.call_timeout, _progress_relay(ctx, params.meta))
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                return await self._settle_failure(door, run, step, upstream, exc)
        if asks_for_input(raw):  # no outcome yet: a 2026 agent answers and calls again, which is a new step
            message = f"upstream {upstream.name} asked for input before answering (input_required)"
            await self._journal(door, run, step, StepStatus.UNCERTAIN, error=message)
            if not is_modern(ctx.protocol_version):
                return tool_error(f"{message}, which the agent's MCP revision cannot be asked: its effect is "
                                  f"unknown (step {step} of {run.run_id} is uncertain)")
        elif is_error(raw):
            await self._journal(door, run, step, StepStatus.FAILED, error=error_text(raw))
        else:
            await self._journal(door, run, step, StepStatus.SUCCEEDED, result=journaled_answer(raw))
        return passed_through("tools/call", raw)

    async def _checkpoint(self, ctx: ServerRequestContext[Any, Any], arguments: LooseJSONObject) -> Any:
        """Journal a checkpoint in the agent's run; the agent's arguments are untrusted like any call's."""
        try:
            unknown = sorted(set(arguments) - {"name"})
            if unknown:
                raise BadInput(f"{CHECKPOINT_TOOL} has no argument {unknown[0][:40]!r} (its one argument: name)")
            if "name" not in arguments:
                raise BadInput(f"{CHECKPOINT_TOOL} needs a name")
            door = self.door_for(ctx)
            run = await self.run_for(ctx)
            made = await door.acheckpoint(run, arguments["name"])
        except ReversiError as exc:
            return from_error(exc)
        return structured(made.to_dict(), f"checkpoint {made.name!r} after step {made.after_step} of {run.run_id}")

    async def _capture(self, door: PrincipalLedger, run: RunRecord, tool: str, arguments: LooseJSONObject
                       ) -> Captured | None:
        """The manifest entry's capture of this call, read on the upstreams before it is forwarded; a
        capture that fails is journaled `refused` and raised (the call is not forwarded)."""
        async def read(name: str, args: LooseJSON) -> LooseJSON:
            return await call_upstream(self.pool, name, args, self.call_timeout, keep_text=True)

        try:
            return await take_capture(door.manifests.lookup(tool), run, arguments, read,
                                      stopped=lambda: door.astopped(run, tool))
        except CaptureFailed as refusal:
            await door.arefuse(run, tool, arguments, refusal)
            raise  # arefuse raised already

    async def _settle_failure(
        self, door: PrincipalLedger, run: RunRecord, step: int, upstream: Upstream, exc: BaseException
    ) -> types.CallToolResult:
        """Journal a call that got no answer, and say what happened; JSON-RPC errors and cancellation re-raise."""
        where = f"step {step} of {run.run_id}"
        if isinstance(exc, MCPError):
            await self._journal(door, run, step, StepStatus.FAILED, error=f"{exc.code}: {exc.message}")
            raise exc
        if isinstance(exc, UpstreamUnavailable):
            await self._journal(door, run, step, StepStatus.FAILED, error=f"{exc}; the call was not sent")
            return tool_error(f"{exc}; the call was not sent ({where} failed)")
        if isinstance(exc, TimeoutError):
            message = f"upstream {upstream.name} did not answer within {self.call_timeout:g} s"
        elif isinstance(exc, UpstreamLost):
            message = str(exc)
        elif isinstance(exc, anyio.get_cancelled_exc_class()):
            cancelled = "the call was cancelled before it answered"
            await self._journal(door, run, step, StepStatus.UNCERTAIN, error=cancelled)
            raise exc
        elif isinstance(exc, Exception):
            message = f"upstream {upstream.name}: {type(exc).__name__}: {exc}"
        else:
            await self._journal(door, run, step, StepStatus.UNCERTAIN, error=f"interrupted: {type(exc).__name__}")
            raise exc
        await self._journal(door, run, step, StepStatus.UNCERTAIN, error=message)
        return tool_error(f"{message}: its effect is unknown ({where} is uncertain)")

    async def _journal(
        self, door: PrincipalLedger, run: RunRecord, step: int, status: StepStatus, *, result: object = None,
        error: str | None = None,
    ) -> None:
        try:
            await door.aforwarded_outcome(run, step, status, result=result, error=error)
            self.metrics.outcome(status.value)
        except ReversiError as exc:  # the step stays `intended`: unresolved, never lost
            log.error("could not journal the outcome of step %s of %s: %s", step, run.run_id, exc.message)

    # -- everything else passes through ----------------------------------------------------------

    def _relaying(self, upstream: Upstream, ctx: ServerRequestContext[Any, Any]) -> AbstractContextManager[None]:
        """While the agent's request is in flight on `upstream`: what the upstream asks goes to it."""
        relay = self.pool.relay
        return relay.calling(upstream.name, ctx) if relay is not None else nullcontext()

    async def _forward(self, ctx: Any, upstream: Upstream, request: Any) -> LooseJSONObject:
        try:
            with self._relaying(upstream, ctx):
                return await upstream.request(request, self.call_timeout)
        except (UpstreamUnavailable, UpstreamLost, TimeoutError) as exc:
            raise MCPError(-32603, str(exc) or f"upstream {upstream.name} did not answer") from exc

    async def _list(self, ctx: Any, method: str, capability: str, field: str, key: str, cursor: Any) -> Any:
        make = _LISTINGS[method]
        upstreams = self.pool.with_capability(capability)
        if len(upstreams) == 1:
            page = await self._forward(ctx, upstreams[0], make(params=types.PaginatedRequestParams(cursor=cursor)))
            return passed_through(method, page)
        merged: list[LooseJSON] = []
        for upstream in upstreams:
            page = await self._forward(ctx, upstream, make(params=types.PaginatedRequestParams()))
            for item in page.get(field) or ():
                self._owners[(capability, str(item.get(key)))] = upstream
                merged.append(item)
        return passed_through(method, {field: merged})

    def _owner(self, capability: str, key: str | None) -> Upstream:
        upstreams = self.pool.with_capability(capability)
        if not upstreams:
            raise MCPError(-32601, "Method not found")
        return self._owners.get((capability, str(key)), upstreams[0])

    async def _pass(self, ctx: ServerRequestContext[Any, Any], method: str, upstream: Upstream, params: Any) -> Any:
        """Forward one request as the agent made it (less what is the agent's own, or its era's only)."""
        clean = for_upstream(ctx.params, upstream.protocol_version, forward_meta(params.meta))
        return passed_through(method, await self._forward(ctx, upstream, AsSent(method=method, params=clean)))

    async def list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        return await self._list(ctx, "resources/list", "resources", "resources", "uri", params and params.cursor)

    async def list_resource_templates(self, ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        cursor = params and params.cursor
        return await self._list(
            ctx, "resources/templates/list", "resources", "resourceTemplates", "uriTemplate", cursor
        )

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        return await self._pass(ctx, "resources/read", self._owner("resources", str(params.uri)), params)

    async def list_prompts(self, ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        return await self._list(ctx, "prompts/list", "prompts", "prompts", "name", params and params.cursor)

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> Any:
        return await self._pass(ctx, "prompts/get", self._owner("prompts", params.name), params)

    async def complete(self, ctx: Any, params: types.CompleteRequestParams) -> Any:
        return await self._pass(ctx, "completion/complete", self._owner("completions", None), params)

    # -- the agent's side of the upstreams' own requests (see `relay`) ----------------------------

    async def _joined(self, ctx: ServerRequestContext[Any, Any], params: Any) -> None:
        if self.pool.relay is not None:
            self.pool.relay.seen(ctx)

    async def _roots_changed(self, ctx: ServerRequestContext[Any, Any], params: Any) -> None:
        """The agent's roots changed: every upstream hears it, and asks the agent again."""
        for upstream in self.pool.upstreams:
            await upstream.notify_roots_changed()

    def server(self) -> Server[Any]:
        """The low-level server: the first upstream's identity, and only the capabilities some upstream has."""
        first = self.pool.upstreams[0]
        info = first.server_info if len(self.pool.upstreams) == 1 else None
        identity: dict[str, Any] = {"name": "reversi-gateway", "version": version()}
        if info is not None:  # one upstream: the agent sees it as it is
            identity = {k: v for k, v in info if k in _IDENTITY}
            identity["instructions"] = first.instructions
        server: Server[Any] = Server(
            **identity,
            get_tool_input_schema=self.pool.input_schema,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,  # upstream results pass through raw
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
        for note, handler in (
            ("notifications/initialized", self._joined),
            ("notifications/roots/list_changed", self._roots_changed),
        ):
            server.add_notification_handler(note, types.NotificationParams, handler)
        # Upstreams' results pass through as they came; no tracing span per message: the journal is the record.
        server.middleware = [exact_results(lambda: server.server_info_stamp)]
        return server
