"""LangChain: `journaled(tools, run)` journals every call an agent makes to those `BaseTool`s.

    from reversi.integrations.langchain import journaled

    run = ledger.start_run(run_id=f"run_{thread_id}", actor="billing-agent")   # one run per session
    tools = journaled([create_charge, send_email], run, names={"create_charge": "stripe.create_charge"})

Each wrapped tool keeps its name, description and argument schema, so the model sees the same tools.
A LangGraph `interrupt()` inside a tool pauses the call: its step stays open (`intended`), and the
tool run again when the graph resumes (same tool call id) continues that step.
A refusal (a halt, a duplicate, an approval to wait for) comes back as the tool's error output
(a `ToolMessage` with `status="error"` when the call carries its id): the model reads the reason and
nothing is called. The tool's own errors are handled as its `handle_tool_error` says, after the
step is journaled `failed`. Async tools stay async (`ainvoke` journals through `run.acall`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, ToolException
from langchain_core.tools import tool as make_tool
from langchain_core.tools.base import _is_injected_arg_type, get_all_basemodel_annotations
from pydantic import BaseModel

from reversi.core.json_values import JSONObject
from reversi.engine.rollback import ReadBack
from reversi.engine.run import Run
from reversi.errors import BadInput, Refused
from reversi.integrations._journal import journaled_name, plain_arguments, refusal_text, usable_call_id

__all__ = ["JournaledTool", "RefusedCall", "journaled"]

ErrorHandler = bool | str | Callable[[ToolException], Any] | None
_TOOL_CALL_ID: ContextVar[str | None] = ContextVar("reversi_langchain_tool_call_id", default=None)


def _pauses() -> tuple[type[BaseException], ...]:
    """How LangGraph says a call waits (`interrupt()`): it did not fail. An application whose graph can
    interrupt has imported LangGraph already; this module does not import it."""
    errors = sys.modules.get("langgraph.errors")
    found = getattr(errors, "GraphInterrupt", None)
    return (found,) if isinstance(found, type) and issubclass(found, BaseException) else ()


class RefusedCall(ToolException):
    """Reversi refused the call: its text is what the model reads."""


class _ErrorOutput:
    """The wrapper's `handle_tool_error`: a refusal's text, else what the wrapped tool's own setting says."""

    def __init__(self, own: ErrorHandler) -> None:
        self.own = own

    def __call__(self, exc: ToolException) -> Any:
        if isinstance(exc, RefusedCall) or self.own is True:
            return exc.args[0] if exc.args else "Tool execution error"
        if isinstance(self.own, str):
            return self.own
        if callable(self.own):
            return self.own(exc)
        raise exc


class JournaledTool(BaseTool):
    """A `BaseTool` whose calls go through `run`: `intended` before, the outcome after."""

    wrapped: BaseTool
    journal: Run
    tool_name: str
    capture: Any = None  # a `reversi.engine.capture.Read`, or None

    def _input(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str | dict[str, Any], JSONObject]:
        """What to hand the wrapped tool, and what to journal: the arguments the model gave, without
        those the framework injects (a runtime, a call id); a single text input as `input`."""
        if args:
            return args[0], plain_arguments({"input": args[0]})
        schema = self.wrapped.tool_call_schema
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return kwargs, plain_arguments({k: v for k, v in kwargs.items() if k in schema.model_fields})
        return kwargs, plain_arguments(kwargs)

    def _call_id(self, kwargs: dict[str, Any]) -> str | None:
        """The model's tool call id, where the wrapped tool takes it injected (`InjectedToolCallId`, as
        tools that answer with a `Command` do): it must be handed on, or the tool refuses to run."""
        schema = self.wrapped.args_schema
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            return None
        for name, annotation in get_all_basemodel_annotations(schema).items():
            given = kwargs.get(name)
            if _is_injected_arg_type(annotation, injected_type=InjectedToolCallId) and isinstance(given, str):
                return given
        return None

    def run(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        """`BaseTool.run`, keeping the model's tool call id for the journal (a paused call resumes its step)."""
        token = _TOOL_CALL_ID.set(tool_call_id)
        try:
            return super().run(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
        finally:
            _TOOL_CALL_ID.reset(token)

    async def arun(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        """`BaseTool.arun`, keeping the model's tool call id, as `run`."""
        token = _TOOL_CALL_ID.set(tool_call_id)
        try:
            return await super().arun(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
        finally:
            _TOOL_CALL_ID.reset(token)

    def _run(
        self,
        *args: Any,
        config: RunnableConfig,
        run_manager: CallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> Any:
        callbacks = run_manager.get_child() if run_manager else None
        tool_input, journaled_args = self._input(args, kwargs)

        def call(**_: Any) -> Any:
            return self.wrapped.run(tool_input, callbacks=callbacks, config=config, tool_call_id=self._call_id(kwargs))

        try:
            return self.journal.call(self.tool_name, journaled_args, call, capture=self.capture,
                                     call_id=usable_call_id(_TOOL_CALL_ID.get()), pauses=_pauses())
        except Refused as exc:
            raise RefusedCall(refusal_text(exc.message)) from exc

    async def _arun(
        self,
        *args: Any,
        config: RunnableConfig,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> Any:
        callbacks = run_manager.get_child() if run_manager else None
        tool_input, journaled_args = self._input(args, kwargs)

        async def call(**_: Any) -> Any:
            return await self.wrapped.arun(tool_input, callbacks=callbacks, config=config,
                                           tool_call_id=self._call_id(kwargs))

        try:
            return await self.journal.acall(self.tool_name, journaled_args, call, capture=self.capture,
                                            call_id=usable_call_id(_TOOL_CALL_ID.get()), pauses=_pauses())
        except Refused as exc:
            raise RefusedCall(refusal_text(exc.message)) from exc


def journal_tool(tool: BaseTool, run: Run, *, name: str | None = None,
                 capture: ReadBack | None = None) -> JournaledTool:
    """Wrap one tool; `name` is the tool name to journal and look up in the manifests (else its own);
    `capture(tool, arguments)` makes the reads manifest entries declare (`capture:`)."""
    inner = tool.model_copy(update={"handle_tool_error": False})  # its errors reach the journal as `failed`
    return JournaledTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema if tool.args_schema is not None else tool.get_input_schema(),
        return_direct=tool.return_direct,
        handle_validation_error=tool.handle_validation_error,
        handle_tool_error=_ErrorOutput(tool.handle_tool_error),
        wrapped=inner,
        journal=run,
        tool_name=name or tool.name,
        capture=capture,
    )


def journaled(tools: Iterable[BaseTool | Callable[..., Any]], run: Run, *, names: Mapping[str, str] | None = None,
              capture: ReadBack | None = None) -> list[BaseTool]:
    """Wrap `tools` so that each call is journaled in `run`.

    Args:
        tools: LangChain tools (`@tool` functions, `StructuredTool`s, any `BaseTool`), or plain functions
            with a docstring, made tools as `@tool` makes them.

    Raises:
        BadInput: something that is neither a tool nor a function.
        run: the run of this agent session (`ledger.start_run(run_id=...)` continues it by id).
        names: tool name -> the name to journal and look up in the manifests.
        capture: `capture(tool, arguments)` reads what a manifest entry's `capture` names before the
            call; None: the ledger's reader command, if configured, else nothing is read and the plan
            says so.
    """
    made = [_as_tool(t) for t in tools]
    return [journal_tool(t, run, name=journaled_name(names or {}, t.name), capture=capture) for t in made]


def _as_tool(given: object) -> BaseTool:
    if isinstance(given, BaseTool):
        return given
    if callable(given) and not isinstance(given, type):
        made: BaseTool = make_tool(given)  # as `@tool` would: its name, docstring and signature
        return made
    raise BadInput(f"journaled: {type(given).__name__} {given!r:.60} is neither a LangChain tool nor a function")
