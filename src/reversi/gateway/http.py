"""The gateway over streamable HTTP: agents at `/mcp`, operators at `/operator/mcp`, `/healthz` at the root.

Every request carries `Authorization: Bearer KEY`; the key's name is the principal. With no key in
the store at all the gateway serves loopback only and every request is the admin `local` (SPEC §7).
A request's run is its `Reversi-Run-Id` header (continued, or created under that id), else the
run of its MCP session, else a new run.
"""

from __future__ import annotations

import logging
import sys
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import uvicorn
from mcp.server import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from reversi.core.models import RunRecord
from reversi.core.surfaces import Surface
from reversi.distribution import version
from reversi.engine.access import Access, bearer
from reversi.engine.keys import Role, is_loopback, keyless_request_allowed
from reversi.engine.ledger import Ledger
from reversi.engine.principal_ledger import PrincipalLedger
from reversi.errors import ConfigError, Forbidden, ReversiError, Unauthorized
from reversi.gateway.compensation_check import warn_of_misfits, warn_of_missing_compensations
from reversi.gateway.metrics import GatewayMetrics
from reversi.gateway.operator import Operator
from reversi.gateway.options import GatewayOptions
from reversi.gateway.proxy import Proxy
from reversi.gateway.relay import Relay
from reversi.gateway.sessions import Sessions, owner, whole_body
from reversi.gateway.upstream import UpstreamPool
from reversi.listening import listen
from reversi.mcp_results import is_modern

log = logging.getLogger("reversi.gateway")

DOOR_KEY = "reversi.door"  # the request's principal-bound ledger, in its ASGI scope
# The endpoints that need a key, and the role each needs: the agents' proxy, then the operator tools.
GUARDED: tuple[tuple[str, Role], ...] = (("/mcp", Role.AGENT), ("/operator/mcp", Role.OPERATOR))
NO_KEYS = "no keys in the store: serving loopback only; every request acts as the admin principal local"


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


class _Guard:
    """Authenticates each request, checks the run header, and hands on the principal's door (its
    `PrincipalLedger`) in the scope: what serves the request acts only through it."""

    def __init__(self, ledger: Ledger, role: Role, runs: RunBinder | None = None) -> None:
        self.ledger = ledger
        self.role = role
        self.runs = runs
        self.app: ASGIApp | None = None

    def _admit(self, headers: Headers, scope: Scope) -> PrincipalLedger:
        """The ledger as the request's principal may use it, once it may use its endpoint and the run its
        `Reversi-Run-Id` names (if any).

        Raises:
            Unauthorized: see `access.authenticate`.
            Forbidden: an agent key on the operator endpoint, or another principal's run.
            BadInput: a bad run id.
        """
        client, server = scope.get("client"), scope.get("server")
        local_ok = keyless_request_allowed(str(client[0]) if client else None, headers.get("host"),
                                           headers.get("origin"), scheme=scope.get("scheme", "http"),
                                           own_port=server[1] if server else None)
        principal = self.ledger.authenticate(bearer(headers.get("authorization")), local_ok=local_ok)
        door = self.ledger.for_principal(principal, Surface.GATEWAY)
        door.require(self.role)
        run_id = headers.get("reversi-run-id")
        if self.role is Role.AGENT and run_id is not None:  # the operator endpoint records in no run
            known = self.runs.known(run_id) if self.runs is not None else None
            if known is not None:  # whose run it is never changes: no need to read it again
                door.check(known, Access.RECORD)
            else:
                door.run_to_continue(run_id)
        return door

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None, "the gateway is still starting"
        headers = Headers(scope=scope)
        try:
            door = await anyio.to_thread.run_sync(self._admit, headers, scope)
        except ReversiError as exc:  # answered before any of the body is read
            await _refusal(exc)(scope, receive, send)
            return
        replay = await whole_body(receive)
        if replay is None:
            return
        if self.role is not Role.AGENT:  # an operator's request acts at once: its key is read again now the
            try:  # body is in (it may have come long after the headers); an agent's calls are checked
                door = await anyio.to_thread.run_sync(self._admit, headers, scope)  # by their journal write
            except ReversiError as exc:
                await _refusal(exc)(scope, receive, send)
                return
        scope[DOOR_KEY] = door
        scope["user"] = owner(door.principal)  # the SDK serves a session to its opener only
        await self.app(scope, replay, send)


def _refusal(exc: ReversiError) -> Response:
    answer = _error(exc.http_status, exc.code, exc.message)
    if isinstance(exc, Unauthorized):
        answer.headers["WWW-Authenticate"] = "Bearer"
    return answer


def door_of(ctx: ServerRequestContext[Any, Any]) -> PrincipalLedger:
    """The door `_Guard` handed on with the request."""
    request = ctx.request
    door = request.scope.get(DOOR_KEY) if isinstance(request, Request) else None
    if not isinstance(door, PrincipalLedger):
        raise Forbidden("no principal for this request")
    return door


class RunBinder:
    """Which run an HTTP request's calls go to, opening or continuing it on first use."""

    # Runs kept in memory (most recently used): enough for the runs in use, bounded however many a
    # stateless agent opens; one dropped is read from the store again when it comes back.
    KEPT_RUNS = 1024

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.is_open: Callable[[str], bool] = lambda session: False
        self._runs: OrderedDict[str, RunRecord] = OrderedDict()
        self._sessions: dict[str, str] = {}  # a handshake session's id -> its run's id
        self._lock = anyio.Lock()

    def known(self, run_id: str) -> RunRecord | None:
        """The run `run_id` as this gateway opened or continued it, if it has."""
        return self._runs.get(run_id)

    def sessions(self) -> set[str]:
        """The sessions whose run this binder keeps."""
        return set(self._sessions)

    def forget(self, session: str) -> None:
        """The session ended: its run is no longer its calls', nor kept unless another session's."""
        run_id = self._sessions.pop(session, None)
        if run_id is not None and run_id not in self._sessions.values():
            self._runs.pop(run_id, None)

    async def run_for(self, ctx: ServerRequestContext[Any, Any]) -> RunRecord:
        door = door_of(ctx)
        request = ctx.request
        assert isinstance(request, Request)
        run_id = request.headers.get("reversi-run-id")
        # A stateless (2026) request belongs to no session, whatever header it sends.
        session = None if is_modern(ctx.protocol_version) else request.headers.get("mcp-session-id")
        async with self._lock:
            if run_id is None and session is not None:
                run_id = self._sessions.get(session)
            record = self._runs.get(run_id) if run_id else None
            if record is None:
                record = await anyio.to_thread.run_sync(lambda: self._open(door, run_id, request))
            else:
                door.check(record, Access.RECORD)
            self._keep(record)
            if session is not None and self.is_open(session):  # not if it ended while the run opened
                self._sessions[session] = record.run_id
        return record

    def _keep(self, record: RunRecord) -> None:
        self._runs[record.run_id] = record
        self._runs.move_to_end(record.run_id)
        while len(self._runs) > self.KEPT_RUNS:
            self._runs.popitem(last=False)

    def _open(self, door: PrincipalLedger, run_id: str | None, request: Request) -> RunRecord:
        run, _ = door.open_run(
            run_id,
            actor=request.headers.get("reversi-actor", ""),
            environment=request.headers.get("reversi-environment", ""),
            mode=self.mode,
        )
        return run.record


def _security(host: str, port: int) -> TransportSecuritySettings | None:
    """The MCP SDK's Host and Origin checks on a loopback address: a browser page may call only from
    this gateway's own origin (`port` is the one it listens on), never from another loopback port."""
    if not is_loopback(host):
        return None  # reachable by name from elsewhere: the keys are the protection
    names = ["127.0.0.1", "localhost", "[::1]"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names],
        allowed_origins=[f"{scheme}://{name}:{port}" for scheme in ("http", "https") for name in names],
    )


def create_app(options: GatewayOptions, ledger: Ledger, pool: UpstreamPool, port: int) -> Starlette:
    """The Starlette app, served on `port` (the one bound, when the options ask for any free one); the
    upstreams in `pool` must already be started."""
    assert options.http is not None
    host = options.http[0]
    metrics = GatewayMetrics(pool)
    runs = RunBinder(options.mode)
    proxy = Proxy(pool, door_of, runs.run_for, options.call_timeout, metrics, checkpoint_tool=options.checkpoint_tool)
    operator = Operator(door_of, pool, options.call_timeout)
    idle, security = options.session_idle_timeout, _security(host, port)
    managers = [
        Sessions(proxy.server(), idle_timeout=idle, security=security, on_end=runs.forget),
        Sessions(operator.server(), idle_timeout=idle, security=security),
    ]
    runs.is_open = managers[0].is_open
    metrics.count_sessions({
        "/mcp": lambda: len(managers[0].open_ids() | runs.sessions()),
        "/operator/mcp": lambda: len(managers[1].open_ids()),
    })
    guards = [_Guard(ledger, role, runs if role is Role.AGENT else None) for _, role in GUARDED]
    for guard, manager in zip(guards, managers, strict=True):
        guard.app = StreamableHTTPASGIApp(manager)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "status": "ok",
                "version": version(),
                "upstreams": {
                    u.name: {"tools": len(u.tools), "restarts": u.restarts, "last_error": u.last_error}
                    for u in pool.upstreams
                },
            }
        )

    async def metrics_page(request: Request) -> Response:
        return Response(metrics.exposition(), media_type=metrics.content_type)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for manager in managers:
                await stack.enter_async_context(manager.run())
            yield

    return Starlette(
        routes=[
            *(Route(path, endpoint=guard) for (path, _), guard in zip(GUARDED, guards, strict=True)),
            Route("/healthz", endpoint=healthz),
            Route("/metrics", endpoint=metrics_page),
        ],
        lifespan=lifespan,
    )


async def serve_http(options: GatewayOptions, ledger: Ledger) -> None:
    """Serve until interrupted.

    Raises:
        ConfigError: a non-loopback address with no keys in the store.
    """
    assert options.http is not None
    host, port = options.http
    keyless = not ledger.has_keys()
    if keyless and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve {host} with no keys in the store: create one with "
            "`reversi keys create NAME --role agent`, or bind to 127.0.0.1"
        )
    async with anyio.create_task_group() as tg:
        pool = UpstreamPool(options.upstreams, Relay(one_agent=False, wait_s=options.call_timeout))
        await pool.start(tg)  # said after it: when no upstream starts, its error is all there is to say
        if keyless:
            print(f"reversi-gateway: {NO_KEYS}", file=sys.stderr, flush=True)
        warn_of_missing_compensations(pool, ledger.manifests)
        warn_of_misfits(pool, options.manifests, ledger.manifests)
        sock = listen(host, port)  # before the app: its origin checks need the port bound
        app = create_app(options, ledger, pool, sock.getsockname()[1])
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
        tg.start_soon(_announce, server)
        await server.serve(sockets=[sock])
        tg.cancel_scope.cancel()


async def _announce(server: uvicorn.Server) -> None:
    while not server.started:
        await anyio.sleep(0.01)
    for listener in server.servers:
        for sock in listener.sockets:
            host, port = sock.getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            print(f"reversi-gateway: serving http://{shown}:{port}/mcp and /operator/mcp", file=sys.stderr, flush=True)

