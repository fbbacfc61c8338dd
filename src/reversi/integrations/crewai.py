"""CrewAI: `journaled(tools, run)` journals every call an agent makes to those tools.

    from reversi.integrations.crewai import journaled

    run = ledger.start_run(run_id=f"run_{session_id}", actor="billing-agent")   # one run per session
    agent = Agent(role="billing", goal=..., backstory=...,
                  tools=journaled([create_charge, send_email], run, names={"create_charge": "stripe.create_charge"}))

Each wrapped tool keeps its name, description, argument schema and settings (`result_as_answer`,
`max_usage_count`, `cache_function`, `tool_failure_policy`), so the agent sees the same tools. A refusal
(a halt, a duplicate, an approval to wait for) calls nothing and answers with a `ToolFailure`, CrewAI's
own way for a tool to say it did not do what it was asked: the model reads the reason, and the agent's
`tool_failure_policy` applies as to any failure. The tool's own errors are journaled `failed`, then reach
CrewAI as without Reversi; a `ToolFailure` the tool returns is journaled `failed` too. Async stays async:
`arun` journals through `run.acall`.

CrewAI's tool-call hooks (`before_tool_call`, `after_tool_call`) are not used: they are global to the
process, not given the call's error apart from its text, and cannot wrap the call, so a capture, the
call's span and a timeout's `uncertain` would be lost.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from crewai.tools import BaseTool
from crewai.tools import tool as make_tool
from crewai.tools.base_tool import Tool
from crewai.tools.tool_failure import ToolFailure

from reversi.core.json_values import JSONObject
from reversi.engine.rollback import ReadBack
from reversi.engine.run import Run
from reversi.errors import BadInput, Refused
from reversi.integrations._journal import journaled_name, plain_arguments, refusal_text

__all__ = ["JournaledTool", "journal_tool", "journaled"]


class _Reported(Exception):
    """The tool answered with a `ToolFailure`: the call failed, and the agent gets that answer."""

    def __init__(self, failure: ToolFailure) -> None:
        super().__init__(failure.as_agent_message())
        self.failure = failure


def _checked(answer: Any) -> Any:
    if isinstance(answer, ToolFailure):
        raise _Reported(answer)
    return answer


def _refused(exc: Refused) -> ToolFailure:
    return ToolFailure(message=refusal_text(exc.message), code=exc.code)


class JournaledTool(BaseTool):
    """A CrewAI tool whose calls go through `run`: `intended` before, the outcome after."""

    wrapped: BaseTool
    journal: Run
    tool_name: str
    capture: Any = None  # a `reversi.engine.capture.Read`, or None

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        def call(**_: Any) -> Any:
            return _checked(self.wrapped.run(*args, **kwargs))

        try:
            return self.journal.call(self.tool_name, self._journaled(args, kwargs), call, capture=self.capture)
        except Refused as exc:
            return _refused(exc)
        except _Reported as exc:
            return exc.failure

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        async def call(**_: Any) -> Any:
            if _has_async(self.wrapped):
                return _checked(await self.wrapped.arun(*args, **kwargs))
            return _checked(await asyncio.to_thread(self.wrapped.run, *args, **kwargs))  # a sync tool: off the loop

        try:
            return await self.journal.acall(self.tool_name, self._journaled(args, kwargs), call, capture=self.capture)
        except Refused as exc:
            return _refused(exc)
        except _Reported as exc:
            return exc.failure

    @staticmethod
    def _journaled(args: tuple[Any, ...], kwargs: dict[str, Any]) -> JSONObject:
        """The arguments to journal: the model's, by name; a single positional input as `input`."""
        return plain_arguments({"input": args[0]} if args else kwargs)


def _has_async(tool: BaseTool) -> bool:
    """Whether `tool.arun` runs it asynchronously (a `Tool` of a sync function would call it, then fail)."""
    if isinstance(tool, Tool):
        return inspect.iscoroutinefunction(tool.func)
    return type(tool)._arun is not BaseTool._arun


def journal_tool(tool: BaseTool, run: Run, *, name: str | None = None,
                 capture: ReadBack | None = None) -> JournaledTool:
    """Wrap one tool; `name` is the tool name to journal and look up in the manifests (else its own);
    `capture(tool, arguments)` makes the reads manifest entries declare (`capture:`)."""
    inner = tool.model_copy(update={"max_usage_count": None})  # the wrapper counts the uses, once
    return JournaledTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        result_schema=tool.result_schema,
        env_vars=tool.env_vars,
        cache_function=tool.cache_function,
        result_as_answer=tool.result_as_answer,
        max_usage_count=tool.max_usage_count,
        tool_failure_policy=tool.tool_failure_policy,
        wrapped=inner,
        journal=run,
        tool_name=name or tool.name,
        capture=capture,
    )


def journaled(tools: Iterable[BaseTool | Callable[..., Any]], run: Run, *, names: Mapping[str, str] | None = None,
              capture: ReadBack | None = None) -> list[BaseTool]:
    """Wrap `tools` so that each call is journaled in `run`.

    Args:
        tools: CrewAI tools (`@tool` functions, `BaseTool` subclasses), or plain functions with a
            docstring, made tools as `@tool` makes them.
        run: the run of this agent session (`ledger.start_run(run_id=...)` continues it by id).
        names: tool name -> the name to journal and look up in the manifests.
        capture: `capture(tool, arguments)` reads what a manifest entry's `capture` names before the
            call; None: the ledger's reader command, if configured, else nothing is read and the plan
            says so.

    Raises:
        BadInput: something that is neither a tool nor a function.
    """
    made = [_as_tool(t) for t in tools]
    return [journal_tool(t, run, name=journaled_name(names or {}, t.name), capture=capture) for t in made]


def _as_tool(given: object) -> BaseTool:
    if isinstance(given, BaseTool):
        return given
    if callable(given) and not isinstance(given, type):
        made: BaseTool = make_tool(given)  # as `@tool` would: its name, docstring and signature
        return made
    raise BadInput(f"journaled: {type(given).__name__} {given!r:.60} is neither a CrewAI tool nor a function")
