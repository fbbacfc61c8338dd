"""A fake of Slack's Web API as documented: Bearer bot tokens, every answer HTTP 200 with `ok`, errors
as `{"ok": false, "error": "channel_not_found"}`, messages named by channel and `ts`, threads."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reversi.core.json_values import LooseJSONObject
from reversi.demo.fakes.base import FakeBase

TOKEN = "xoxb-fake"
CHANNEL = "C0123456789"


def slack_error(error: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": error})


@dataclass
class FakeSlack(FakeBase):
    messages: dict[str, dict[str, LooseJSONObject]] = field(default_factory=lambda: {CHANNEL: {}})
    clock: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def app(self) -> Starlette:
        routes = [
            Route("/chat.postMessage", self.post, methods=["POST"]),
            Route("/chat.delete", self.delete, methods=["POST"]),
            Route("/conversations.history", self.history, methods=["GET"]),
            Route("/conversations.replies", self.replies, methods=["GET"]),
        ]
        return Starlette(routes=[Route(r.path, self._signed(r.endpoint), methods=r.methods) for r in routes])

    def _signed(self, endpoint: Callable[..., Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            auth = request.headers.get("authorization")
            if not auth:
                return slack_error("not_authed")
            if auth != f"Bearer {TOKEN}":
                return slack_error("invalid_auth")
            args = dict(request.query_params) if request.method == "GET" else await request.json()
            if args.get("channel") not in self.messages:
                return slack_error("channel_not_found")
            response: Response = await endpoint(args, self.messages[args["channel"]])
            return response

        return handle

    def post_now(self, channel: str, text: str, thread_ts: str | None = None) -> LooseJSONObject:
        ts = f"1700000000.{next(self.clock):06d}"
        message = {"type": "message", "user": "U0BOT", "text": text, "ts": ts}
        if thread_ts:
            message["thread_ts"] = thread_ts
            parent = self.messages[channel][thread_ts]
            parent["reply_count"] = parent.get("reply_count", 0) + 1
            parent["thread_ts"] = thread_ts
        self.messages[channel][ts] = message
        return message

    async def post(self, args: LooseJSONObject, channel: dict[str, LooseJSONObject]) -> Response:
        if not args.get("text"):
            return slack_error("no_text")
        if args.get("thread_ts") and args["thread_ts"] not in channel:
            return slack_error("thread_not_found")
        message = self.post_now(args["channel"], args["text"], args.get("thread_ts"))
        return JSONResponse({"ok": True, "channel": args["channel"], "ts": message["ts"], "message": message})

    async def delete(self, args: LooseJSONObject, channel: dict[str, LooseJSONObject]) -> Response:
        if args.get("ts") not in channel:
            return slack_error("message_not_found")
        self.effects[f"delete {args['ts']}"] += 1
        del channel[args["ts"]]
        return JSONResponse({"ok": True, "channel": args["channel"], "ts": args["ts"]})

    def _window(self, args: LooseJSONObject, messages: list[LooseJSONObject]) -> list[LooseJSONObject]:
        oldest, latest = float(args.get("oldest", 0)), float(args.get("latest", 9e12))
        inclusive = args.get("inclusive") in ("true", "1")
        kept = [m for m in messages if oldest < float(m["ts"]) < latest
                or (inclusive and float(m["ts"]) in (oldest, latest))]
        return sorted(kept, key=lambda m: m["ts"], reverse=True)[: int(args.get("limit", 100))]

    async def history(self, args: LooseJSONObject, channel: dict[str, LooseJSONObject]) -> Response:
        top = [m for m in channel.values() if m.get("thread_ts", m["ts"]) == m["ts"]]
        return JSONResponse({"ok": True, "messages": self._window(args, top), "has_more": False})

    async def replies(self, args: LooseJSONObject, channel: dict[str, LooseJSONObject]) -> Response:
        if args.get("ts") not in channel:
            return slack_error("thread_not_found")
        thread = [m for m in channel.values() if m.get("thread_ts") == args["ts"] or m["ts"] == args["ts"]]
        return JSONResponse({"ok": True, "messages": self._window(args, thread), "has_more": False})
