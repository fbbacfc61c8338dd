"""Running a fake API (a Starlette app) on 127.0.0.1, port 0, in a thread of the test process, so the
connectors' subprocesses reach it over real HTTP. Each fake counts its effects and can be told to
fail the next requests (a 429 with Retry-After, a 503) the way the real service does."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send


@dataclass
class Failure:
    status: int
    body: Any
    headers: dict[str, str]
    times: int


@dataclass
class FakeBase:
    """State every fake shares: effects counted by what made them, failures to serve next, requests seen."""

    effects: Counter[str] = field(default_factory=Counter)
    requests: list[tuple[str, str]] = field(default_factory=list)
    failures: dict[str, Failure] = field(default_factory=dict)

    def fail_next(self, method_path: str, status: int, body: Any, times: int = 1, **headers: str) -> None:
        """Answer the next `times` requests to `METHOD /path` with this error instead."""
        self.failures[method_path] = Failure(status, body, headers, times)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            name = f"{scope['method']} {scope['path']}"
            self.requests.append((scope["method"], scope["path"]))
            failure = self.failures.get(name)
            if failure is not None and failure.times > 0:
                failure.times -= 1
                await JSONResponse(failure.body, failure.status, headers=failure.headers)(scope, receive, send)
                return
            await app(scope, receive, send)

        return serve


def bearer(request: Request, token: str) -> bool:
    return request.headers.get("authorization") == f"Bearer {token}"


@contextmanager
def serving(app: Starlette, fake: FakeBase) -> Iterator[str]:
    """Serve the app; yields its base URL (http://127.0.0.1:PORT)."""
    server = uvicorn.Server(uvicorn.Config(fake.middleware(app), host="127.0.0.1", port=0, log_level="warning",
                                           lifespan="off"))
    started = threading.Event()
    original: Callable[..., Any] = server.startup

    async def startup(*args: Any, **kwargs: Any) -> None:
        await original(*args, **kwargs)
        started.set()

    server.startup = startup  # type: ignore[method-assign]
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    if not started.wait(30):
        raise RuntimeError("the fake API did not start")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


URL = "the fake's URL"


@contextmanager
def served_with(fake: Any, monkeypatch: Any, **settings: str) -> Iterator[Any]:
    """Serve `fake` and point the connector's settings at it (a value of `URL` becomes its address)."""
    with serving(fake.app(), fake) as url:
        for name, value in settings.items():
            monkeypatch.setenv(name, url if value == URL else value)
        yield fake
