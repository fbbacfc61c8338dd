"""LangChain 1.x agents: `JournalMiddleware(run)` journals every tool call of `create_agent`.

    from langchain.agents import create_agent
    from reversi.integrations.langchain_agents import JournalMiddleware

    run = ledger.start_run(run_id=f"run_{thread_id}", actor="billing-agent")   # one run per thread
    agent = create_agent(model, tools=[create_charge, send_email],
                         middleware=[JournalMiddleware(run, names={"create_charge": "stripe.create_charge"})])

No tool is wrapped one by one: the middleware sees each call as the agent makes it (`wrap_tool_call`),
with the model's tool call id. A refusal calls nothing and comes back as an error `ToolMessage` the
model reads. The step's `$result` is what the agent's tool node made of the call: the `ToolMessage`
(`$result.content`, `$result.artifact`) or a `Command`. A tool error the tool node turns into an error
`ToolMessage` is journaled `failed`. An `interrupt()` inside a tool pauses the call (its step stays
open), and the resumed call continues the same step, as with the LangChain wrapper.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.errors import GraphInterrupt
from langgraph.types import Command

from reversi.engine.capture import Read
from reversi.engine.run import Run
from reversi.errors import Refused
from reversi.integrations._journal import journaled_name, plain_arguments, refusal_text, usable_call_id

__all__ = ["JournalMiddleware"]

Answer = ToolMessage | Command[Any]
_PAUSES = (GraphInterrupt,)  # an interrupt() in a tool: the call waits, it did not fail


class _ToolError(Exception):
    """The tool node answered with an error `ToolMessage`: the call failed, and the model reads that message."""

    def __init__(self, message: ToolMessage) -> None:
        super().__init__(str(message.content))
        self.message = message


class JournalMiddleware(AgentMiddleware):
    """Journals each tool call of the agent in `run` (`names`: tool name -> the name to journal and look
    up in the manifests; `capture`: the reader of the reads manifest entries declare)."""

    def __init__(self, run: Run, *, names: Mapping[str, str] | None = None, capture: Read | None = None) -> None:
        super().__init__()
        self.run = run
        self.names = dict(names or {})
        self.capture = capture

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Answer]) -> Answer:
        tool, args, call_id = self._call(request)

        def call(**_: Any) -> Answer:
            return _checked(handler(request))

        try:
            answer: Answer = self.run.call(tool, args, call, capture=self.capture, call_id=call_id, pauses=_PAUSES)
        except (Refused, _ToolError) as exc:
            return _instead(request, exc)
        return answer

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Answer]]
    ) -> Answer:
        tool, args, call_id = self._call(request)

        async def call(**_: Any) -> Answer:
            return _checked(await handler(request))

        try:
            answer: Answer = await self.run.acall(tool, args, call, capture=self.capture, call_id=call_id,
                                                  pauses=_PAUSES)
        except (Refused, _ToolError) as exc:
            return _instead(request, exc)
        return answer

    def _call(self, request: ToolCallRequest) -> tuple[str, dict[str, Any], str | None]:
        call = request.tool_call
        return journaled_name(self.names, call["name"]), plain_arguments(call["args"]), usable_call_id(call.get("id"))


def _checked(answer: Answer) -> Answer:
    if isinstance(answer, ToolMessage) and answer.status == "error":
        raise _ToolError(answer)
    return answer


def _instead(request: ToolCallRequest, exc: Refused | _ToolError) -> ToolMessage:
    """What the model reads for a call refused (nothing was called) or answered with an error."""
    if isinstance(exc, _ToolError):
        return exc.message
    call = request.tool_call
    return ToolMessage(refusal_text(exc.message), tool_call_id=call.get("id") or "", name=call["name"],
                       status="error")
