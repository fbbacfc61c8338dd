"""A fake transactional-mail API: `POST /messages {to, subject, body}` with a Bearer token sends one
(into `outbox`) and answers `{"id", "status": "sent"}`. There is no way to unsend: that is the point."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reversi.core.json_values import JSONObject
from reversi.demo.fakes.base import FakeBase, bearer

TOKEN = "mail_test_fake"


@dataclass
class FakeMail(FakeBase):
    outbox: list[JSONObject] = field(default_factory=list)
    counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/messages", self.send, methods=["POST"])])

    async def send(self, request: Request) -> Response:
        if not bearer(request, TOKEN):
            return JSONResponse({"message": "bad token"}, 401)
        args = await request.json()
        missing = [name for name in ("to", "subject", "body") if not args.get(name)]
        if missing:
            return JSONResponse({"message": f"{missing[0]} is required"}, 422)
        message = {"id": f"msg_{next(self.counter):04d}", "status": "sent",
                   **{name: args[name] for name in ("to", "subject", "body")}}
        self.outbox.append(message)
        return JSONResponse({"id": message["id"], "status": "sent"}, 202)
