"""The plumbing every endpoint shares: the request as a `Call`, bodies, cursors, and the route table's rows.

An endpoint is a function `Call -> Response` declared with the role it needs and where it runs
(`Runs`). It runs after the body has been read with its size limit and the principal has been
authenticated and checked against the role.

- `Runs.THREAD`: a plain function, run in a worker thread; the key is read from the store for each
  request, before anything else.
- `Runs.LOOP`: a coroutine, run on the event loop, for the recording endpoints agents call for every
  tool call. The principal comes from a cache, and the store is only reached through awaited calls
  that leave the loop: the journal write, one slot of the group commit (`PrincipalLedger.abegin`,
  `aoutcome`, awaited through `Call.recording`), checks again that the key was not revoked meanwhile.
  An answer that no such write checked (an error, say) is held until the key has been read from the
  store again, off the loop. So a revoked key stops working at once in both modes.

The mode is declared, never guessed from how the handler is written: a handler whose definition
disagrees with its declaration (an `async def` declared for a thread, a plain function declared for
the loop) is refused when its `Endpoint` is made, that is when the route table is imported.
"""

from __future__ import annotations

import base64
import binascii
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Any, TypeVar

import anyio
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from reversi.core.bounded_cache import BoundedCache
from reversi.core.json_values import JSONObjectView, JSONView, LooseJSON, compact, parse_json
from reversi.core.models import check_run_id
from reversi.core.surfaces import Surface
from reversi.engine.access import bearer, require_role
from reversi.engine.keys import Principal, Role, keyless_request_allowed
from reversi.engine.ledger import Ledger
from reversi.engine.principal_ledger import PrincipalLedger
from reversi.errors import BadInput, BodyTooLarge, StoreUnavailable, Unauthorized
from reversi.server.bodies import Body, parse_body
from reversi.server.metrics import Metrics

MAX_BODY_BYTES = 1 << 20
_PRINCIPAL_CACHE = 1024
B = TypeVar("B", bound=Body)
T = TypeVar("T")


@dataclass
class ServerState:
    """What the endpoints share: the ledger, the metrics, the rollback settings and the job worker."""

    ledger: Ledger
    metrics: Metrics
    compensator_cmd: str | None = None
    reader_cmd: str | None = None
    wake_worker: Callable[[], None] = lambda: None
    limiter: anyio.CapacityLimiter | None = None
    _principals: BoundedCache[str | None, Principal] = field(
        default_factory=lambda: BoundedCache(_PRINCIPAL_CACHE)
    )

    def principal(self, authorization: str | None, local_ok: bool) -> Principal:
        """The principal of a request, read from the store.

        Raises:
            Unauthorized: see `access.authenticate`.
        """
        return self.ledger.authenticate(bearer(authorization), local_ok=local_ok)

    async def cached_principal(self, request: Request) -> Principal:
        """The request's principal, kept once read: only for `Runs.LOOP` endpoints, whose answers wait
        for the key to be checked again (`Endpoint._on_loop`). Whether the request may act as the keyless
        `local` is asked only of a request that would act as it, so a request with a key never pays for
        that check."""
        authorization = request.headers.get("authorization")
        found = self._principals.get(authorization)
        if found is not None and found.key_id is not None:
            return found
        local_ok = keyless_ok(request)
        if found is not None and local_ok:
            return found
        principal = await anyio.to_thread.run_sync(self.principal, authorization, local_ok)
        return self._principals.put(authorization, principal)

    def forget_principal(self, authorization: str | None) -> None:
        self._principals.pop(authorization)


@dataclass(frozen=True)
class Call:
    """One request, as an endpoint sees it."""

    server: ServerState
    principal: Principal
    request: Request
    raw_body: bytes

    @property
    def path(self) -> Mapping[str, Any]:
        return self.request.path_params

    @property
    def query(self) -> Mapping[str, str]:
        return self.request.query_params

    @property
    def headers(self) -> Headers:
        return self.request.headers

    @cached_property
    def ledger(self) -> PrincipalLedger:
        """The ledger as this request's principal may use it."""
        return self.server.ledger.for_principal(self.principal, Surface.API)

    key_checked: bool = field(default=False, init=False)  # a write of this request found the key still valid

    async def recording(self, journal: Awaitable[T]) -> T:
        """Await a journal write of `ledger.abegin`/`aoutcome`, which checks the key in its transaction;
        a key found revoked there is forgotten here, so the next request with it reads the store again.

        Raises:
            Unauthorized: the key was revoked since it was read (or, acting as the loopback admin,
                the store now holds keys).
        """
        try:
            found = await journal
        except Unauthorized:
            self.server.forget_principal(self.headers.get("authorization"))
            raise
        object.__setattr__(self, "key_checked", True)  # frozen for the endpoint; this flag is the plumbing's
        return found

    def body(self, model: type[B]) -> B:
        return parse_body(self.raw_body, model)

    @property
    def run_id(self) -> str:
        return check_run_id(self.path["run_id"])

    @property
    def step(self) -> int:
        text = str(self.path["step"])
        if not is_whole_number(text) or len(text) > 9:
            raise BadInput(f"bad step number {text!r}: expected a whole number from 0")
        return int(text)

    def limit(self, default: int = 100) -> int:
        text = self.query.get("limit")
        if text is None:
            return default
        if not is_whole_number(text) or not 1 <= int(text) <= 1000:
            raise BadInput(f"limit {text!r}: expected a whole number from 1 to 1000")
        return int(text)

    def cursor(self) -> LooseJSON:
        """The decoded `cursor` query parameter, or None."""
        text = self.query.get("cursor")
        if text is None:
            return None
        try:
            return parse_json(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode(), "the cursor")
        except (BadInput, ValueError, binascii.Error):
            raise BadInput(f"bad cursor {text!r}: pass the `next` of the previous page as it was") from None


    def cursor_of(self, kinds: tuple[type, ...]) -> tuple[LooseJSON, ...] | None:
        """The `cursor` query parameter as a tuple of values of these types, or None.

        Raises:
            BadInput: a cursor that is not the `next` of a page of this listing.
        """
        value = self.cursor()
        if value is None:
            return None
        if not (isinstance(value, list) and len(value) == len(kinds) and all(
                isinstance(v, kind) and not isinstance(v, bool) for v, kind in zip(value, kinds, strict=True))):
            raise BadInput("bad cursor: pass the `next` of the previous page as it was")
        return tuple(value)


def encode_cursor(value: JSONView) -> str:
    return base64.urlsafe_b64encode(compact(value).encode()).decode().rstrip("=")


def reply(data: JSONView | Mapping[str, object], status: int = 200) -> Response:
    """`data` as the JSON answer (a TypedDict of a JSON object is no JSONView to the type checker)."""
    return JSONResponse(data, status_code=status)


def page(items: Sequence[JSONView], next_value: JSONView, **more: JSONView) -> Response:
    """A listing: `{items, next}`, where `next` is the cursor of the following page, or null; and `more`."""
    return reply({"items": items, "next": None if next_value is None else encode_cursor(next_value), **more})


def offset_page(call: Call, items: Sequence[JSONView], **more: JSONView) -> Response:
    """A listing of a small, whole list, paged by position (`more`: as `page`)."""
    start = call.cursor() or 0
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        raise BadInput("bad cursor: pass the `next` of the previous page as it was")
    end = start + call.limit()
    return page(items[start:end], end if end < len(items) else None, **more)


@dataclass(frozen=True)
class Param:
    """A query parameter, for the OpenAPI document."""

    name: str
    description: str
    schema: JSONObjectView = field(default_factory=lambda: {"type": "string"})


class Runs(Enum):
    """Where an endpoint's handler runs, and so where its key is read (see the module's docstring)."""

    THREAD = "thread"  # a plain function in a worker thread; the key read from the store first
    LOOP = "loop"  # a coroutine on the event loop; the key cached, and read again by its write or after it


@dataclass(frozen=True)
class Endpoint:
    """One row of the route table: the handler, the role it needs, where it runs, and what the OpenAPI
    document says.

    Raises:
        TypeError: the handler is a coroutine function and `runs` is not `Runs.LOOP`, or the reverse.
    """

    method: str
    path: str
    handler: Callable[[Call], Response] | Callable[[Call], Awaitable[Response]]
    role: Role
    summary: str
    ok: Mapping[int, str]  # status -> the name of the response's schema
    body: type[Body] | None = None
    query: tuple[Param, ...] = ()
    ndjson: bool = False
    runs: Runs = field(kw_only=True)

    def __post_init__(self) -> None:
        coroutine = inspect.iscoroutinefunction(self.handler)
        if coroutine == (self.runs is Runs.LOOP):
            return
        name = f"{self.method} {self.path}: {getattr(self.handler, '__qualname__', repr(self.handler))}"
        if coroutine:
            raise TypeError(f"{name} is a coroutine function (async def) declared runs=Runs.{self.runs.name}: "
                            "declare runs=Runs.LOOP (its key then comes from a cache and is checked by its "
                            "journal write), or make it a plain function")
        raise TypeError(f"{name} is declared runs=Runs.LOOP but is a plain function: the event loop would wait "
                        "for it; declare runs=Runs.THREAD, or make it a coroutine that awaits the store")

    @property
    def on_loop(self) -> bool:
        """Whether the handler runs on the event loop (see the module's docstring)."""
        return self.runs is Runs.LOOP

    def asgi(self, server: ServerState) -> Callable[[Request], Awaitable[Response]]:
        if self.on_loop:
            async def on_loop(request: Request) -> Response:
                return await self._on_loop(server, request)

            return on_loop
        reads_body = self.body is not None

        async def endpoint(request: Request) -> Response:
            # Who asks, and whether their role may, is settled before the body is read: a request
            # without a valid key is answered at once, whatever body it announces.
            if not reads_body:  # one trip to a thread for both the key and the answer
                return await anyio.to_thread.run_sync(self._run, server, request, limiter=server.limiter)
            await anyio.to_thread.run_sync(self._principal, server, request, limiter=server.limiter)
            raw = await read_body(request)
            # the body can come long after the headers (a client may hold its last byte): the key is read
            # again once it is in, so a key revoked meanwhile does nothing
            return await anyio.to_thread.run_sync(self._run, server, request, raw, limiter=server.limiter)

        return endpoint

    async def _on_loop(self, server: ServerState, request: Request) -> Response:
        """Answer on the loop with the cached principal; an answer its journal write did not check the key
        for (a refusal, an error, a handler that wrote nothing) waits for the key to be read again."""
        principal, call = await server.cached_principal(request), None
        try:
            self._allowed(principal)
            call = self._call(server, principal, request, await read_body(request) if self.body else b"")
            response = self.handler(call)
            assert inspect.isawaitable(response)
            answer = await response
        except StoreUnavailable:
            raise  # says nothing a revoked key could use, and the store could not tell anyway
        except Exception:
            if call is None or not call.key_checked:
                await self._check_again(server, request)  # a revoked key hears 401, not what went wrong
            raise
        if not call.key_checked:
            await self._check_again(server, request)
        return answer

    @staticmethod
    async def _check_again(server: ServerState, request: Request) -> None:
        authorization = request.headers.get("authorization")
        try:
            await anyio.to_thread.run_sync(server.principal, authorization, keyless_ok(request),
                                           limiter=server.limiter)
        except Unauthorized:
            server.forget_principal(authorization)
            raise

    def _principal(self, server: ServerState, request: Request) -> Principal:
        return self._allowed(server.principal(request.headers.get("authorization"), keyless_ok(request)))

    def _allowed(self, principal: Principal) -> Principal:
        require_role(principal, self.role, reading=self.method == "GET")
        return principal

    def _run(self, server: ServerState, request: Request, raw: bytes = b"") -> Response:
        return self._answer(self._call(server, self._principal(server, request), request, raw))

    def _answer(self, call: Call) -> Response:
        response = self.handler(call)
        assert isinstance(response, Response)
        return response

    @staticmethod
    def _call(server: ServerState, principal: Principal, request: Request, raw: bytes) -> Call:
        request.scope["reversi.principal"] = principal
        return Call(server, principal, request, raw)


def is_whole_number(text: str) -> bool:
    """Whether `text` is a whole number written in ASCII digits (`str.isdigit` also takes "²" and "٣")."""
    return text.isascii() and text.isdigit()


def keyless_ok(request: Request) -> bool:
    """Whether the request may act as the keyless admin `local` (if the store has no keys): see
    `keyless_request_allowed`; the server's own port is the one the request's socket was accepted on."""
    headers, server = request.headers, request.scope.get("server")
    return keyless_request_allowed(request.client.host if request.client else None, headers.get("host"),
                                   headers.get("origin"), scheme=request.url.scheme,
                                   own_port=server[1] if server else None)


async def read_body(request: Request) -> bytes:
    """The body, refused with BodyTooLarge as soon as it is known to be over the limit."""
    length = request.headers.get("content-length", "")
    if is_whole_number(length) and int(length) > MAX_BODY_BYTES:
        raise BodyTooLarge()
    chunks, size = [], 0
    while True:  # ASGI's receive directly: Request.stream() costs more than the rest of this function
        message = await request.receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BodyTooLarge(MAX_BODY_BYTES)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
