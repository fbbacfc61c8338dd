"""OpenAI Agents SDK: `journaled(tools, run)` journals every call an agent makes to those function tools.

    from reversi.integrations.openai_agents import journaled

    run = ledger.start_run(run_id=f"run_{session_id}", actor="billing-agent")   # one run per session
    tools = journaled([create_charge], run, names={"create_charge": "stripe.create_charge"})
    agent = Agent(name="billing", tools=tools)

Each wrapped tool is a copy of the `FunctionTool` (same name, schema, approval and timeout settings).
A refusal (a halt, a duplicate, an approval to wait for) is returned to the model as the tool's output
text, the SDK's way to send an error back to the model: it reads the reason and nothing is called (the
SDK's default `failure_error_function` would hide the reason behind "please try again"). The tool's own
errors are journaled `failed`, then handled by the tool's `failure_error_function` as before.
"""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, get_args, get_origin

from agents import FunctionTool, Tool, function_tool
from agents.tool import set_function_tool_failure_error_function, with_function_tool_failure_error_handler
from agents.tool_context import ToolContext

from reversi.engine.capture import Read
from reversi.engine.run import Run
from reversi.errors import BadInput, Refused
from reversi.integrations._journal import journaled_name, plain_arguments, refusal_text

__all__ = ["journal_tool", "journaled"]


def _arguments(text: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(text or "{}")
    except ValueError:
        return None
    return plain_arguments(parsed) if isinstance(parsed, dict) else None


def journal_tool(tool: FunctionTool, run: Run, *, name: str | None = None, capture: Read | None = None) -> FunctionTool:
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
            return await run.acall(journaled_as, args, call, capture=capture)
        except Refused as exc:
            return refusal_text(exc.message)

    outer = copy.copy(tool)  # keeps the tool's own failure_error_function for its own errors
    outer.on_invoke_tool = with_function_tool_failure_error_handler(invoke, _handled)
    FunctionTool.__post_init__(outer)  # type: ignore[no-untyped-call]  # binds the failure handling to this copy, as the SDK's own copies do
    return outer


_OTHER_TOOLS = tuple(get_origin(t) or t for t in get_args(Tool) if (get_origin(t) or t) is not FunctionTool)
"""The SDK's tools that are not function tools: hosted ones (web search, file search, ...) and its own."""


def _handled(tool: FunctionTool, error: Exception, arguments: str) -> None:
    """The tool's own error was turned into text for the model; the journal already has it as `failed`."""


def journaled(tools: Iterable[Tool | Callable[..., Any]], run: Run, *, names: Mapping[str, str] | None = None,
              capture: Read | None = None) -> list[Tool]:
    """Wrap function tools so that each call is journaled in `run`.

    Args:
        tools: `@function_tool` functions or any `FunctionTool`; plain functions, made function tools as
            `@function_tool` makes them; hosted tools (`WebSearchTool`, ...), which run on OpenAI's side
            where nothing can journal them, passed through unwrapped with a warning.

    Raises:
        BadInput: something that is none of those.
        run: the run of this agent session (`ledger.start_run(run_id=...)` continues it by id).
        names: tool name -> the name to journal and look up in the manifests.
        capture: `capture(tool, arguments)` reads what a manifest entry's `capture` names before the
            call (the journaled tool name, the capture's own arguments); None: the ledger's reader
            command, if configured, else nothing is read and the plan says so.
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

