"""Running a fake API (a Starlette app) on 127.0.0.1, port 0, in a thread of this process (a test's, or
`reversi demo`'s), so the connectors' subprocesses reach it over real HTTP. Each fake counts its
effects and can be told to fail the next requests (a 429 with Retry-After, a 503) the way the real
service does, or to hold a request's answer back after doing what it asks (a call that times out)."""

from __future__ import annotations

import abc
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reversi.core.json_values import JSONView

HOLD_LIMIT_S = 60.0


@dataclass
class Failure:
    status: int
    body: JSONView
    headers: dict[str, str]
    times: int


@dataclass
class FakeBase(abc.ABC):
    """State every fake shares: effects counted by what made them, failures to serve next, requests seen."""

    effects: Counter[str] = field(default_factory=Counter)
    requests: list[tuple[str, str]] = field(default_factory=list)
    raw_paths: list[str] = field(default_factory=list)  # each request's path as it was sent, still encoded
    failures: dict[str, Failure] = field(default_factory=dict)
    holds: Counter[str] = field(default_factory=Counter)
    released: threading.Event = field(default_factory=threading.Event)

    @abc.abstractmethod
    def app(self) -> Starlette:
        """The fake's Starlette app (each fake has its routes)."""

    def fail_next(self, method_path: str, status: int, body: JSONView, times: int = 1, **headers: str) -> None:
        """Answer the next `times` requests to `METHOD /path` with this error instead."""
        self.failures[method_path] = Failure(status, body, headers, times)

    def hold_next(self, method_path: str) -> None:
        """Do what the next `METHOD /path` request asks, but keep its answer until `release()`."""
        self.released.clear()
        self.holds[method_path] += 1

    def release(self) -> None:
        """Send the answers held back (at the latest they go after HOLD_LIMIT_S)."""
        self.released.set()

    async def _answer_later(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        answer: list[Message] = []

        async def keep(message: Message) -> None:
            answer.append(message)

        await app(scope, receive, keep)
        deadline = time.monotonic() + HOLD_LIMIT_S
        while not self.released.is_set() and time.monotonic() < deadline:
            await anyio.sleep(0.02)
        for message in answer:
            await send(message)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            name = f"{scope['method']} {scope['path']}"
            self.requests.append((scope["method"], scope["path"]))
            self.raw_paths.append(bytes(scope.get("raw_path") or b"").decode("latin-1"))
            failure = self.failures.get(name)
            if failure is not None and failure.times > 0:
                failure.times -= 1
                await JSONResponse(failure.body, failure.status, headers=failure.headers)(scope, receive, send)
                return
            if self.holds[name] > 0:
                self.holds[name] -= 1
                await self._answer_later(app, scope, receive, send)
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

