"""`create_app`: the ASGI application of `reversi-server`. Errors become answers here, in `on_error` only:
JSON on the API's paths, an HTML page (the console's `error_page`) on the console's.

The API lives under `/v1`; the web console (`reversi.server.console`) is served at `/`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Receive, Scope, Send

from reversi.core.json_values import LooseJSONObject
from reversi.distribution import version
from reversi.engine.ledger import Ledger
from reversi.errors import ApprovalRequired, Refused, ReversiError, Unauthorized
from reversi.server.api import ENDPOINTS
from reversi.server.console import Console, console_for
from reversi.server.endpoint import ServerState
from reversi.server.jobs import MAX_UNDOS, JobWorker
from reversi.server.metrics import Metrics, Timing
from reversi.server.openapi import openapi_document
from reversi.server.retention import RetentionTask

log = logging.getLogger("reversi.server")
_UNSET: Any = object()
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}
CLIENT_GONE = 499  # as nginx counts a request whose client closed the connection first: in the metrics only


ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]


def _error_handler(ledger: Ledger, metrics: Metrics, console: Console | None = None) -> ErrorHandler:
    async def on_error(request: Request, exc: Exception) -> Response:
        """The one place an error becomes an answer: `{"error": {"code", "message"}}` with its status
        (on a console path, the console's HTML page saying the same)."""
        if isinstance(exc, ClientDisconnect):  # nobody is left to answer: one line, no traceback
            log.info("%s %s: the client went away before its request's body arrived", request.method,
                     request.url.path)
            return Response(status_code=CLIENT_GONE)
        headers: dict[str, str] = {}
        body: dict[str, LooseJSONObject]  # `{"error": ...}`, and what an error carries besides (`approval`)
        if isinstance(exc, ReversiError):
            status, body = exc.http_status, {"error": exc.to_dict()}
            if isinstance(exc, Refused):
                metrics.refusals.labels(exc.code).inc()
            if isinstance(exc, ApprovalRequired):
                approval = await anyio.to_thread.run_sync(ledger.approval, exc.approval_id)
                body["approval"] = approval.to_dict()
            if isinstance(exc, Unauthorized):
                headers["WWW-Authenticate"] = "Bearer"
        elif isinstance(exc, HTTPException):
            status, headers = exc.status_code, dict(exc.headers or {})
            if status == 405:  # Starlette names the methods of one route; the path has others
                headers["Allow"] = ", ".join(_methods_at(request))
            message = (f"no such endpoint: {request.method} {request.url.path}" if status == 404
                       else f"{request.method} is not allowed on {request.url.path}" if status == 405
                       else str(exc.detail))
            body = {"error": {"code": _HTTP_CODES.get(status, "http_error"), "message": message}}
        else:
            log.error("internal error answering %s %s", request.method, request.url.path, exc_info=exc)
            status, body = 500, {"error": {"code": "internal", "message": "internal error: see the server's log"}}
        if console is not None and console.serves(request.url.path):
            return await console.error_page(request, status, body["error"]["message"], headers)
        return JSONResponse(body, status_code=status, headers=headers)

    return on_error


def _methods_at(request: Request) -> list[str]:
    """Every method some route answers at the request's path."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE and isinstance(route, Route) and route.methods:
            methods |= route.methods
    return sorted(methods)


class RecordingRoutes:
    """Answers the recording endpoints before any middleware or the router sees the request.

    Agents call these two routes for every tool call, so they skip the middleware's wrapping of each
    message and the router's walk; their errors are answered by the same `on_error`, and their
    latency is counted as `Timing` counts every other route's.
    """

    def __init__(self, routes: list[Route], on_error: ErrorHandler, metrics: Metrics) -> None:
        self.routes, self.on_error, self.metrics = routes, on_error, metrics

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Answer the request if it is for a recording route; False if it is not."""
        if scope["type"] != "http":
            return False
        for route in self.routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                start = time.perf_counter()
                scope.update(child, route=route)
                request = Request(scope, receive)
                try:
                    response = await route.endpoint(request)
                except Exception as exc:
                    response = await self.on_error(request, exc)
                await response(scope, receive, send)
                self.metrics.observe(scope["method"], route.path, response.status_code, time.perf_counter() - start)
                return True
        return False


class ReversiApp(Starlette):
    """The Starlette app, with the recording routes answered ahead of it, counting requests in flight."""

    recording: RecordingRoutes | None = None
    server: ServerState | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._answer(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.recording is None or not await self.recording.answer(scope, receive, send):
            await super().__call__(scope, receive, send)


_EVERY_WINDOW = timedelta(days=365 * 100)  # every window a standing step has, for the soonest of them


def create_app(
    ledger: Ledger,
    *,
    compensator_cmd: str | None = _UNSET,
    reader_cmd: str | None = _UNSET,
    run_jobs: bool = True,
    poll_s: float = 2.0,
    threads: int = 64,
    retention_every_s: float | None = None,
    max_undos: int = MAX_UNDOS,
) -> Starlette:
    """The server over `ledger` (which the caller closes).

    `compensator_cmd` and `reader_cmd` default to the ledger's settings (REVERSI_COMPENSATOR_CMD,
    REVERSI_READER_CMD). With `run_jobs`, a worker runs rollback jobs while the app's lifespan lasts,
    looking for jobs left by other servers every `poll_s` seconds, running at most `max_undos` undo
    commands at once across its jobs. Endpoints run in up to `threads`
    threads at once, so that concurrent journal writes share commits. With `retention:` configured, a
    task prunes the runs past it every `retention_every_s` seconds (default REVERSI_RETENTION_INTERVAL_S,
    else an hour) while the lifespan lasts.
    """
    settings = ledger.settings
    compensator_cmd = settings.compensator_cmd if compensator_cmd is _UNSET else compensator_cmd
    reader_cmd = settings.reader_cmd if reader_cmd is _UNSET else reader_cmd
    metrics = Metrics()
    worker = (
        JobWorker(ledger, compensator_cmd, reader_cmd, metrics, poll_s=poll_s, max_undos=max_undos)
        if run_jobs and compensator_cmd
        else None
    )
    every_s = retention_every_s or settings.retention_interval_s
    retention = RetentionTask(ledger, metrics, every_s) if settings.retention else None
    state = ServerState(ledger, metrics, compensator_cmd, reader_cmd, worker.wake if worker else lambda: None)
    document = openapi_document(ENDPOINTS)
    console = console_for(state)
    on_error = _error_handler(ledger, metrics, console)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": version()})

    def read_windows() -> None:
        now = datetime.now(UTC)
        metrics.windows(lambda: ledger.closing(_EVERY_WINDOW, now=now)[0], now)

    async def metrics_page(request: Request) -> Response:
        await anyio.to_thread.run_sync(read_windows, limiter=state.limiter)
        return Response(metrics.exposition(), media_type=metrics.content_type)

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.limiter = anyio.CapacityLimiter(threads)
        if worker is not None:
            await anyio.to_thread.run_sync(worker.start)
        if retention is not None:
            retention.start()
        try:
            yield
        finally:
            if retention is not None:
                await anyio.to_thread.run_sync(retention.stop)
            if worker is not None:
                await anyio.to_thread.run_sync(worker.stop)

    routes: list[BaseRoute] = [Route(ep.path, ep.asgi(state), methods=[ep.method]) for ep in ENDPOINTS]
    recording = [route for route, ep in zip(routes, ENDPOINTS, strict=True) if ep.on_loop and isinstance(route, Route)]
    routes += [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_page, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
    routes += console.routes()
    app = ReversiApp(
        routes=routes,
        middleware=[Middleware(Timing, metrics=metrics)],
        # Every class but Exception is answered where it is raised; Exception (a bug) is answered, then re-raised
        # for uvicorn to log it.
        exception_handlers={ReversiError: on_error, HTTPException: on_error, ClientDisconnect: on_error,
                            Exception: on_error},
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # `/v1/runs/` is no endpoint: a JSON 404, not a redirect
    app.state.reversi = state
    app.server = state
    app.recording = RecordingRoutes(recording, on_error, metrics)
    return app
