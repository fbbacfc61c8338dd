"""LangChain: `journaled(tools, run)` journals every call an agent makes to those `BaseTool`s.

    from reversi.integrations.langchain import journaled

    run = ledger.start_run(run_id=f"run_{thread_id}", actor="billing-agent")   # one run per session
    tools = journaled([create_charge, send_email], run, names={"create_charge": "stripe.create_charge"})

Each wrapped tool keeps its name, description and argument schema, so the model sees the same tools.
A refusal (a halt, a duplicate, an approval to wait for) comes back as the tool's error output
(a `ToolMessage` with `status="error"` when the call carries its id): the model reads the reason and
nothing is called. The tool's own errors are handled as its `handle_tool_error` says, after the
step is journaled `failed`. Async tools stay async (`ainvoke` journals through `run.acall`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel

from reversi.engine.run import Run
from reversi.errors import Refused
from reversi.integrations._journal import journaled_name, plain_arguments, refusal_text

__all__ = ["JournaledTool", "RefusedCall", "journaled"]

ErrorHandler = bool | str | Callable[[ToolException], Any] | None


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

    def _journal_args(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The arguments the model gave, without those the framework injects (a runtime, a call id)."""
        schema = self.wrapped.tool_call_schema
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            kwargs = {k: v for k, v in kwargs.items() if k in schema.model_fields}
        return plain_arguments(kwargs)

    def _run(
        self, *, config: RunnableConfig, run_manager: CallbackManagerForToolRun | None = None, **kwargs: Any
    ) -> Any:
        callbacks = run_manager.get_child() if run_manager else None

        def call(**_: Any) -> Any:
            return self.wrapped.run(kwargs, callbacks=callbacks, config=config)

        try:
            return self.journal.call(self.tool_name, self._journal_args(kwargs), call)
        except Refused as exc:
            raise RefusedCall(refusal_text(exc.message)) from exc

    async def _arun(
        self, *, config: RunnableConfig, run_manager: AsyncCallbackManagerForToolRun | None = None, **kwargs: Any
    ) -> Any:
        callbacks = run_manager.get_child() if run_manager else None

        async def call(**_: Any) -> Any:
            return await self.wrapped.arun(kwargs, callbacks=callbacks, config=config)

        try:
            return await self.journal.acall(self.tool_name, self._journal_args(kwargs), call)
        except Refused as exc:
            raise RefusedCall(refusal_text(exc.message)) from exc


def journal_tool(tool: BaseTool, run: Run, *, name: str | None = None) -> JournaledTool:
    """Wrap one tool; `name` is the tool name to journal and look up in the manifests (else its own)."""
    inner = tool.model_copy(update={"handle_tool_error": False})  # its errors reach the journal as `failed`
    return JournaledTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        return_direct=tool.return_direct,
        handle_validation_error=tool.handle_validation_error,
        handle_tool_error=_ErrorOutput(tool.handle_tool_error),
        wrapped=inner,
        journal=run,
        tool_name=name or tool.name,
    )


def journaled(tools: Iterable[BaseTool], run: Run, *, names: Mapping[str, str] | None = None) -> list[BaseTool]:
    """Wrap `tools` so that each call is journaled in `run`.

    Args:
        tools: LangChain tools (`@tool` functions, `StructuredTool`s, any `BaseTool`).
        run: the run of this agent session (`ledger.start_run(run_id=...)` continues it by id).
        names: tool name -> the name to journal and look up in the manifests.
    """
    return [journal_tool(t, run, name=journaled_name(names or {}, t.name)) for t in tools]
