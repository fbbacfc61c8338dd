"""The plumbing every endpoint shares: the request as a `Call`, bodies, cursors, and the route table's rows.

An endpoint is a plain function `Call -> Response` declared with the role it needs. It runs after
the body has been read with its size limit and the principal has been authenticated and checked
against the role. Most endpoints run in a worker thread. A recording endpoint (`in_write`) runs
whole, authentication included, inside one slot of the store's group commit: concurrent requests
share one transaction and one fsync, and the event loop never waits on the store.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import anyio
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from reversi.core.models import RunRecord, check_run_id
from reversi.engine.keys import Principal, Role
from reversi.engine.ledger import Ledger
from reversi.engine.run import Run
from reversi.errors import BadInput, NotFound
from reversi.server.auth import Access, check_run, principal_for, require_role
from reversi.server.bodies import Body, parse_body
from reversi.server.metrics import Metrics
from reversi.store.queries import Queries

MAX_BODY_BYTES = 1 << 20
_RUN_CACHE = 4096
B = TypeVar("B", bound=Body)
T = TypeVar("T")


class BodyTooLarge(BadInput):
    """A request body over the limit (1 MiB)."""

    code = "too_large"
    http_status = 413

    def __init__(self) -> None:
        super().__init__(f"the body is larger than {MAX_BODY_BYTES} bytes")


@dataclass
class ServerState:
    """What the endpoints share: the ledger, the metrics, the rollback settings and the job worker."""

    ledger: Ledger
    metrics: Metrics
    compensator_cmd: str | None = None
    reader_cmd: str | None = None
    wake_worker: Callable[[], None] = lambda: None
    limiter: anyio.CapacityLimiter | None = None
    _runs: OrderedDict[str, RunRecord] = field(default_factory=OrderedDict)
    _runs_lock: threading.Lock = field(default_factory=threading.Lock)

    def run_record(self, run_id: str, q: Queries | None = None) -> RunRecord:
        """A run's record (fixed for its lifetime, so it is kept once read), read with `q` if given.

        Raises:
            BadInput: a bad run id.
            NotFound: no such run.
        """
        with self._runs_lock:
            record = self._runs.get(run_id)
        if record is None:
            record = self.ledger.get_run(run_id).record if q is None else _read_run(q, run_id)
            with self._runs_lock:
                self._runs[run_id] = record
                while len(self._runs) > _RUN_CACHE:
                    self._runs.popitem(last=False)
        return record


def _read_run(q: Queries, run_id: str) -> RunRecord:
    record = q.get_run(check_run_id(run_id))
    if record is None:
        raise NotFound(f"no run {run_id}")
    return record


@dataclass(frozen=True)
class Call:
    """One request, as an endpoint sees it; `q` is the write transaction of an `in_write` endpoint."""

    server: ServerState
    principal: Principal
    path: Mapping[str, Any]
    query: Mapping[str, str]
    headers: Headers
    raw_body: bytes
    q: Queries | None = None

    def write(self, fn: Callable[[Queries], T]) -> T:
        """Run a write function: in this request's transaction if it has one, else in a new one."""
        return fn(self.q) if self.q is not None else self.server.ledger.store.run_write(fn)

    @cached_property
    def ledger(self) -> Ledger:
        """The ledger acting as this request's principal."""
        return self.server.ledger.acting_as(self.principal.name)

    def body(self, model: type[B]) -> B:
        return parse_body(self.raw_body, model)

    @property
    def run_id(self) -> str:
        return check_run_id(self.path["run_id"])

    def run(self, access: Access) -> Run:
        """The run of the path, if this principal may do `access` on it.

        Raises:
            BadInput, NotFound: a bad or unknown run id.
            Forbidden: `RUN belongs to another principal`.
        """
        record = self.server.run_record(self.run_id, self.q)
        check_run(self.principal, record, access)
        return Run(self.ledger, record)

    @property
    def step(self) -> int:
        text = str(self.path["step"])
        if not text.isdigit() or len(text) > 9:
            raise BadInput(f"bad step number {text!r}: expected a whole number from 0")
        return int(text)

    def limit(self, default: int = 100) -> int:
        text = self.query.get("limit")
        if text is None:
            return default
        if not text.isdigit() or not 1 <= int(text) <= 1000:
            raise BadInput(f"limit {text!r}: expected a whole number from 1 to 1000")
        return int(text)

    def cursor(self) -> Any:
        """The decoded `cursor` query parameter, or None."""
        text = self.query.get("cursor")
        if text is None:
            return None
        try:
            return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise BadInput(f"bad cursor {text!r}: pass the `next` of the previous page as it was") from None


def encode_cursor(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).decode().rstrip("=")


def reply(data: Any, status: int = 200) -> Response:
    return JSONResponse(data, status_code=status)


def page(items: list[Any], next_value: Any) -> Response:
    """A listing: `{items, next}`, where `next` is the cursor of the following page, or null."""
    return reply({"items": items, "next": None if next_value is None else encode_cursor(next_value)})


def offset_page(call: Call, items: list[Any]) -> Response:
    """A listing of a small, whole list, paged by position."""
    start = call.cursor() or 0
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        raise BadInput("bad cursor: pass the `next` of the previous page as it was")
    end = start + call.limit()
    return page(items[start:end], end if end < len(items) else None)


@dataclass(frozen=True)
class Param:
    """A query parameter, for the OpenAPI document."""

    name: str
    description: str
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "string"})


@dataclass(frozen=True)
class Endpoint:
    """One row of the route table: the handler, the role it needs, and what the OpenAPI document says."""

    method: str
    path: str
    handler: Callable[[Call], Response]
    role: Role
    summary: str
    ok: Mapping[int, str]  # status -> the name of the response's schema
    body: type[Body] | None = None
    query: tuple[Param, ...] = ()
    ndjson: bool = False
    in_write: bool = False  # runs inside one write transaction (see the module's docstring)

    def asgi(self, server: ServerState) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            raw = await read_body(request) if self.body is not None else b""
            if self.in_write:
                return await server.ledger.store.arun_write(lambda q: self._run(server, request, raw, q))
            return await anyio.to_thread.run_sync(self._run, server, request, raw, limiter=server.limiter)

        return endpoint

    def _run(self, server: ServerState, request: Request, raw: bytes, q: Queries | None = None) -> Response:
        client = request.client.host if request.client else None
        authorization = request.headers.get("authorization")
        if q is None:
            with server.ledger.store.read() as reading:
                principal = principal_for(reading, authorization, client)
        else:
            principal = principal_for(q, authorization, client)
        require_role(principal, self.role)
        request.scope["reversi.principal"] = principal
        call = Call(server, principal, request.path_params, request.query_params, request.headers, raw, q)
        return self.handler(call)


async def read_body(request: Request) -> bytes:
    """The body, refused with BodyTooLarge as soon as it is known to be over the limit."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise BodyTooLarge()
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BodyTooLarge()
        chunks.append(chunk)
    return b"".join(chunks)

