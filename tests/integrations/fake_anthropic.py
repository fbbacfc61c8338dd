"""A fake of Anthropic's Messages API, to run the real Claude Code CLI (and the Claude Agent SDK over it)
offline: `POST /v1/messages`, streamed as server-sent events when `stream` is true (message_start,
content_block_start / delta / stop, message_delta with the stop reason, message_stop) or one JSON
message when not, and `POST /v1/messages/count_tokens`, in the shapes Anthropic documents.

The main conversation (a request that offers the `Write` tool) is answered from a script: its n-th
request, counted by the assistant turns it already holds, gets `turns[n]`: a `ToolUse`, a `Text`, or
a tuple of them (one answer with several blocks); past the script, `Text("Done.")`. Any other request
(a title, a summary, a quota probe) gets `Text("ok")`. Every request is kept, to assert on.

    fake = FakeAnthropic(turns=[ToolUse("Bash", {"command": "echo hi > f.txt"})])
    with serving(fake.app(), fake) as url:
        env = cli_environment(url, home=tmp_path / "home")   # for ClaudeAgentOptions(env=...) or `claude -p`
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from reversi.demo.fakes.base import FakeBase, serving

__all__ = ["FakeAnthropic", "Text", "ToolUse", "Turn", "bundled_cli", "cli_environment", "serving", "tool_results"]

MAIN_TOOL = "Write"  # the tool only the main conversation is offered


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    """A tool call of the model; `id` defaults to `toolu_fake_<turn>_<block>`."""

    name: str
    input: dict[str, Any]
    id: str = ""


Block = Text | ToolUse
Turn = Block | tuple[Block, ...]


@dataclass
class FakeAnthropic(FakeBase):
    turns: Sequence[Turn] = ()
    messages: list[dict[str, Any]] = field(default_factory=list)  # every /v1/messages body, in order
    main: list[dict[str, Any]] = field(default_factory=list)  # those of the main conversation
    unknown: list[str] = field(default_factory=list)  # `METHOD /path` of requests this fake has no route for

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/messages", self._create, methods=["POST"]),
            Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
            Route("/{path:path}", self._not_found, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]),
        ])

    def reply_to(self, body: dict[str, Any]) -> tuple[Block, ...]:
        """The blocks of the answer to one request body."""
        if not is_main_conversation(body):
            return (Text("ok"),)
        turn = sum(1 for m in body.get("messages", ()) if m.get("role") == "assistant")
        chosen = self.turns[turn] if turn < len(self.turns) else Text("Done.")
        blocks = chosen if isinstance(chosen, tuple) else (chosen,)
        return tuple(ToolUse(b.name, b.input, b.id or f"toolu_fake_{turn}_{i}") if isinstance(b, ToolUse) else b
                     for i, b in enumerate(blocks))

    async def _create(self, request: Request) -> Response:
        body = await request.json()
        self.messages.append(body)
        if is_main_conversation(body):
            self.main.append(body)
        blocks = self.reply_to(body)
        message = _message(str(body.get("model", "claude-fake")), len(self.messages), blocks)
        if body.get("stream"):
            return StreamingResponse(_events(message), media_type="text/event-stream")
        return JSONResponse(message)

    async def _count_tokens(self, request: Request) -> Response:
        body = await request.json()
        return JSONResponse({"input_tokens": max(1, len(json.dumps(body)) // 4)})

    async def _not_found(self, request: Request) -> Response:
        self.unknown.append(f"{request.method} {request.url.path}")
        return JSONResponse({"type": "error", "error": {"type": "not_found_error", "message": "Not found"}}, 404)


def is_main_conversation(body: dict[str, Any]) -> bool:
    return any(isinstance(t, dict) and t.get("name") == MAIN_TOOL for t in body.get("tools") or ())


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of a request's last message, with their content as one string."""
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    found = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_result":
            inner = block.get("content")
            text = inner if isinstance(inner, str) else "".join(
                str(p.get("text", "")) for p in inner or () if isinstance(p, dict))
            found.append({**block, "content": text})
    return found


def cli_environment(url: str, home: Path) -> dict[str, str]:
    """What the Claude Code CLI needs to talk to the fake at `url` and nothing else, with `home` as its
    HOME (its settings, credentials and sessions go there, none of this machine's): the whole
    environment of a `claude -p`. The SDK lays `ClaudeAgentOptions.env` over this process's own
    environment, so remove ANTHROPIC_* and CLAUDE* from that first (monkeypatch.delenv)."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }


def _message(model: str, number: int, blocks: tuple[Block, ...]) -> dict[str, Any]:
    content = [{"type": "tool_use", "id": b.id, "name": b.name, "input": b.input} if isinstance(b, ToolUse)
               else {"type": "text", "text": b.text} for b in blocks]
    stop = "tool_use" if any(isinstance(b, ToolUse) for b in blocks) else "end_turn"
    return {"id": f"msg_fake_{number}", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}


def _events(message: dict[str, Any]) -> Iterator[str]:
    def event(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    start = {**message, "content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
    yield event("message_start", {"message": start})
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            yield event("content_block_start", {"index": index, "content_block": {**block, "input": {}}})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            yield event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
            delta = {"type": "text_delta", "text": block["text"]}
        yield event("content_block_delta", {"index": index, "delta": delta})
        yield event("content_block_stop", {"index": index})
    yield event("message_delta", {"delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                  "usage": {"output_tokens": 5}})
    yield event("message_stop", {})


def bundled_cli() -> Path:
    """The Claude Code CLI the `claude-agent-sdk` wheel ships (what `query()` runs), to run as `claude -p`."""
    import claude_agent_sdk

    return Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
