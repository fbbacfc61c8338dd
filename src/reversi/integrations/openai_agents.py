"""OpenAI Agents SDK: `journaled(tools, run)` journals every call an agent makes to those function tools.

    from reversi.integrations.openai_agents import journaled

    run = ledger.start_run(run_id=f"run_{session_id}", actor="billing-agent")   # one run per session
    tools = journaled([create_charge], run, names={"create_charge": "stripe.create_charge"})
    agent = Agent(name="billing", tools=tools)

Each wrapped tool is a copy of the `FunctionTool` (same name, schema, approval and timeout settings).
The model's tool call id is journaled with each call, and the SDK's own trace and span ids
(`trace_...`, `span_...`) when no OpenTelemetry span is current (an OpenTelemetry span wins: its ids
are the ones the rest of your traces use). A refusal (a halt, a duplicate, an approval to wait for)
is returned to the model as the tool's output
text, the SDK's way to send an error back to the model: it reads the reason and nothing is called (the
SDK's default `failure_error_function` would hide the reason behind "please try again"). The tool's own
errors are journaled `failed`, then handled by the tool's `failure_error_function` as before.
"""

from __future__ import annotations

import contextlib
import copy
import json
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, get_args, get_origin

from agents import FunctionTool, Tool, function_tool
from agents.mcp import MCPServer
from agents.tool import set_function_tool_failure_error_function, with_function_tool_failure_error_handler
from agents.tool_context import ToolContext
from agents.tracing import get_current_span, get_current_trace
from mcp.types import CallToolResult, TextContent

from reversi.core.json_values import JSONObject, LooseJSONObject
from reversi.engine import tracing
from reversi.engine.rollback import ReadBack
from reversi.engine.run import Run
from reversi.errors import BadInput, Refused
from reversi.integrations._journal import journaled_name, plain_arguments, refusal_text, usable_call_id

__all__ = ["JournaledMCPServer", "journal_tool", "journaled", "journaled_mcp"]


def _arguments(text: str) -> JSONObject | None:
    try:
        parsed = json.loads(text or "{}")
    except ValueError:
        return None
    return plain_arguments(parsed) if isinstance(parsed, dict) else None


def journal_tool(tool: FunctionTool, run: Run, *, name: str | None = None,
                 capture: ReadBack | None = None) -> FunctionTool:
    """A copy of `tool` whose calls go through `run`; `name` is the tool name to journal (else its own);
    `capture(tool, arguments)` makes the reads manifest entries declare (`capture:`)."""
    inner = set_function_tool_failure_error_function(copy.copy(tool), None)  # its errors raise, to be journaled
    journaled_as = name or tool.name

    async def invoke(ctx: ToolContext[Any], text: str) -> Any:
        args = _arguments(text)
        if args is None:  # not arguments at all: the tool's own validation answers, nothing to journal
            return await inner.on_invoke_tool(ctx, text)

        async def call(**_: Any) -> Any:
            return await inner.on_invoke_tool(ctx, text)

        try:
            with _sdk_trace():
                return await run.acall(journaled_as, args, call, capture=capture,
                                       call_id=usable_call_id(getattr(ctx, "tool_call_id", None)))
        except Refused as exc:
            return refusal_text(exc.message)

    outer = copy.copy(tool)  # keeps the tool's own failure_error_function for its own errors
    outer.on_invoke_tool = with_function_tool_failure_error_handler(invoke, _handled)
    FunctionTool.__post_init__(outer)  # type: ignore[no-untyped-call]  # binds the failure handling to this copy, as the SDK's own copies do
    return outer


def _sdk_trace() -> contextlib.AbstractContextManager[None]:
    """The SDK's current trace and span ids, for the journal (none when its tracing is off: a no-op trace)."""
    trace, span = get_current_trace(), get_current_span()
    return tracing.framework_trace(trace.trace_id if trace is not None else None,
                                   span.span_id if span is not None else None)


_OTHER_TOOLS = tuple(get_origin(t) or t for t in get_args(Tool) if (get_origin(t) or t) is not FunctionTool)
"""The SDK's tools that are not function tools: hosted ones (web search, file search, ...) and its own."""


class _ToolAnsweredError(Exception):
    """The MCP tool answered with an error (`isError`): the call failed, and the agent gets that answer."""

    def __init__(self, answer: CallToolResult) -> None:
        texts = [c.text for c in answer.content if isinstance(c, TextContent)]
        super().__init__(" ".join(texts) or "the tool answered with an error")
        self.answer = answer


class JournaledMCPServer(MCPServer):
    """An MCP server of the agent (`mcp_servers=`) whose tool calls go through `run`; everything else is
    the wrapped server's."""

    def __init__(self, server: MCPServer, run: Run, names: Mapping[str, str], capture: ReadBack | None) -> None:
        # Not MCPServer.__init__: its settings (structured content, approvals, ...) are the wrapped
        # server's, read through __getattr__.
        self._server, self._run, self._names, self._capture = server, run, dict(names), capture

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

    @property
    def name(self) -> str:
        return self._server.name

    async def connect(self) -> None:
        await self._server.connect()  # type: ignore[no-untyped-call]  # the SDK leaves it untyped

    async def cleanup(self) -> None:
        await self._server.cleanup()  # type: ignore[no-untyped-call]  # the SDK leaves it untyped

    async def list_tools(self, run_context: Any = None, agent: Any = None) -> list[Any]:
        return await self._server.list_tools(run_context, agent)

    async def list_prompts(self) -> Any:
        return await self._server.list_prompts()

    async def get_prompt(self, name: str, arguments: LooseJSONObject | None = None) -> Any:
        return await self._server.get_prompt(name, arguments)

    async def call_tool(self, tool_name: str, arguments: LooseJSONObject | None,
                        meta: LooseJSONObject | None = None) -> CallToolResult:
        async def call(**_: Any) -> CallToolResult:
            answer = await self._server.call_tool(tool_name, arguments, meta)
            if answer.is_error:
                raise _ToolAnsweredError(answer)
            return answer

        try:
            with _sdk_trace():
                result: CallToolResult = await self._run.acall(
                    journaled_name(self._names, tool_name), plain_arguments(arguments or {}), call,
                    capture=self._capture)
        except Refused as exc:
            return CallToolResult(content=[TextContent(type="text", text=refusal_text(exc.message))], is_error=True)
        except _ToolAnsweredError as exc:  # journaled `failed`: the agent reads the server's own answer
            return exc.answer
        return result


def journaled_mcp(server: MCPServer, run: Run, *, names: Mapping[str, str] | None = None,
                  capture: ReadBack | None = None) -> JournaledMCPServer:
    """Wrap an MCP server the agent is given (`Agent(mcp_servers=[journaled_mcp(server, run)])`) so each
    of its tool calls is journaled in `run`: a refusal is the tool's error answer, with the reason; an
    error answer of the server's own is journaled `failed`. `names` and `capture` as for `journaled`."""
    return JournaledMCPServer(server, run, names or {}, capture)


def _handled(tool: FunctionTool, error: Exception, arguments: str) -> None:
    """The tool's own error was turned into text for the model; the journal already has it as `failed`."""


def journaled(tools: Iterable[Tool | Callable[..., Any]], run: Run, *, names: Mapping[str, str] | None = None,
              capture: ReadBack | None = None) -> list[Tool]:
    """Wrap function tools so that each call is journaled in `run`.

    Args:
        tools: `@function_tool` functions or any `FunctionTool`; plain functions, made function tools as
            `@function_tool` makes them; hosted tools (`WebSearchTool`, ...), which run on OpenAI's side
            where nothing can journal them, passed through unwrapped with a warning.

        run: the run of this agent session (`ledger.start_run(run_id=...)` continues it by id).
        names: tool name -> the name to journal and look up in the manifests.
        capture: `capture(tool, arguments)` reads what a manifest entry's `capture` names before the
            call (the journaled tool name, the capture's own arguments); None: the ledger's reader
            command, if configured, else nothing is read and the plan says so.

    Raises:
        BadInput: something that is none of those.
    """
    wrapped: list[Tool] = []
    for given in tools:
        if isinstance(given, FunctionTool) or (callable(given) and not isinstance(given, (type, *_OTHER_TOOLS))):
            made = given if isinstance(given, FunctionTool) else function_tool(given)
            wrapped.append(journal_tool(made, run, name=journaled_name(names or {}, made.name), capture=capture))
        elif isinstance(given, _OTHER_TOOLS):  # hosted (OpenAI runs it) or the SDK's own: no call passes here
            warnings.warn(f"journaled: {type(given).__name__} is not a function tool: its calls are not journaled "
                          "and cannot be rolled back (a hosted tool runs on OpenAI's side)", stacklevel=2)
            wrapped.append(given)
        else:
            raise BadInput(f"journaled: {type(given).__name__} {given!r:.60} is neither a tool nor a function")
    return wrapped

