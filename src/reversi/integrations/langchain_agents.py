"""LangChain 1.x agents: `JournalMiddleware(run)` journals every tool call of `create_agent`.

    from langchain.agents import create_agent
    from reversi.integrations.langchain_agents import JournalMiddleware

    run = ledger.start_run(run_id=f"run_{thread_id}", actor="billing-agent")   # one run per thread
    agent = create_agent(model, tools=[create_charge, send_email],
                         middleware=[JournalMiddleware(run, names={"create_charge": "stripe.create_charge"})])

    # or: each LangGraph thread its own run, `run_thread-<thread id>`, opened (or continued) by its first call
    middleware = JournalMiddleware.per_thread(ledger, actor="billing-agent")

No tool is wrapped one by one: the middleware sees each call as the agent makes it (`wrap_tool_call`),
with the model's tool call id. A refusal calls nothing and comes back as an error `ToolMessage` the
model reads. The step's `$result` is what the tool answered: a dict, which the agent's tool node
carries as JSON text, is journaled as that dict again (`$result.id`, and a connector's sealed result
stays whole for its undo); any other answer as the tool node made it, the `ToolMessage`
(`$result.content`, `$result.artifact`) or a `Command`. A tool error the tool node turns into an error
`ToolMessage` is journaled `failed`. An `interrupt()` inside a tool pauses the call (its step stays
open), and the resumed call continues the same step, as with the LangChain wrapper.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.errors import GraphInterrupt
from langgraph.types import Command, interrupt

from reversi.core.json_values import JSONObject
from reversi.core.models import RUN_ID_RE
from reversi.engine.ledger import Ledger
from reversi.engine.rollback import ReadBack
from reversi.engine.run import Run
from reversi.errors import ApprovalRequired, BadInput, Conflict, NotFound, Refused
from reversi.integrations._journal import journaled_name, plain_arguments, refusal_text, usable_call_id

__all__ = ["JournalMiddleware", "thread_run_id"]

Answer = ToolMessage | Command[Any]
_PAUSES = (GraphInterrupt,)  # an interrupt() in a tool: the call waits, it did not fail


class _ToolError(Exception):
    """The tool node answered with an error `ToolMessage`: the call failed, and the model reads that message."""

    def __init__(self, message: ToolMessage) -> None:
        super().__init__(str(message.content))
        self.message = message


Approvals = Literal["interrupt", "refuse"]


class JournalMiddleware(AgentMiddleware):
    """Journals each tool call of the agent in `run` (`names`: tool name -> the name to journal and look
    up in the manifests; `capture`: the reader of the reads manifest entries declare; `approvals`: a call
    waiting for an approval pauses the graph with `interrupt()`, or is refused to the model)."""

    def __init__(self, run: Run | None, *, names: Mapping[str, str] | None = None, capture: ReadBack | None = None,
                 approvals: Approvals = "interrupt") -> None:
        super().__init__()
        if approvals not in ("interrupt", "refuse"):
            raise BadInput(f"JournalMiddleware: approvals must be 'interrupt' or 'refuse', not {approvals!r}")
        self.run = run
        self.names = dict(names or {})
        self.capture = capture
        self.approvals = approvals
        self._ledger: Ledger | None = None
        self._actor = ""
        self._runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    @classmethod
    def per_thread(cls, ledger: Ledger, *, actor: str = "", names: Mapping[str, str] | None = None,
                   capture: ReadBack | None = None, approvals: Approvals = "interrupt") -> JournalMiddleware:
        """Journal each LangGraph thread's calls in a run of its own, `run_<thread id>` (a digest of a thread
        id that cannot be part of a run id), opened by the thread's first call and continued after."""
        made = cls(None, names=names, capture=capture, approvals=approvals)
        made._ledger, made._actor = ledger, actor
        return made

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Answer]) -> Answer:
        tool, args, call_id = self._call(request)
        run = self._run_of(request)

        def call(**_: Any) -> _Journaled:
            return _checked(handler(request))

        while True:
            try:
                answer: Answer = run.call(tool, args, call, capture=self.capture, call_id=call_id,
                                          pauses=_PAUSES).answer
            except ApprovalRequired as exc:
                if self.approvals == "refuse":
                    return _instead(request, exc)
                interrupt(_waiting(tool, exc))  # pauses the graph; resumed, the call is tried again
                continue
            except (Refused, _ToolError) as exc:
                return _instead(request, exc)
            return answer

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Answer]]
    ) -> Answer:
        tool, args, call_id = self._call(request)
        run = await asyncio.to_thread(self._run_of, request)

        async def call(**_: Any) -> _Journaled:
            return _checked(await handler(request))

        while True:
            try:
                answer: Answer = (await run.acall(tool, args, call, capture=self.capture, call_id=call_id,
                                                  pauses=_PAUSES)).answer
            except ApprovalRequired as exc:
                if self.approvals == "refuse":
                    return _instead(request, exc)
                interrupt(_waiting(tool, exc))
                continue
            except (Refused, _ToolError) as exc:
                return _instead(request, exc)
            return answer

    def _run_of(self, request: ToolCallRequest) -> Run:
        """The run this call is journaled in: the one given, else its thread's."""
        if self.run is not None:
            return self.run
        assert self._ledger is not None
        config = getattr(request.runtime, "config", None) or {}
        thread = (config.get("configurable") or {}).get("thread_id")
        if thread is None:
            raise BadInput("JournalMiddleware.per_thread: the graph was invoked without a thread id"
                           " (config={'configurable': {'thread_id': ...}})")
        run_id = thread_run_id(thread)
        with self._lock:
            if run_id not in self._runs:
                self._runs[run_id] = self._thread_run(run_id)
            return self._runs[run_id]

    def _thread_run(self, run_id: str) -> Run:
        """The thread's run, opened or continued; one another actor opened is not this agent's to continue.

        Raises:
            Conflict: the run was opened by another actor.
        """
        assert self._ledger is not None
        try:
            found = self._ledger.get_run(run_id)
        except NotFound:
            return self._ledger.start_run(run_id=run_id, actor=self._actor)
        if found.actor != self._actor:
            raise Conflict(f"JournalMiddleware.per_thread: {run_id} belongs to actor {found.actor!r}, not"
                           f" {self._actor!r}: give each agent threads of its own")
        return self._ledger.start_run(run_id=run_id, actor=self._actor)

    def _call(self, request: ToolCallRequest) -> tuple[str, JSONObject, str | None]:
        call = request.tool_call
        return journaled_name(self.names, call["name"]), plain_arguments(call["args"]), usable_call_id(call.get("id"))


def thread_run_id(thread: object) -> str:
    """The run of a LangGraph thread: `run_thread-<thread id>`, or `run_threadh-<digest>` for an id that
    cannot be part of a run id. The two forms never meet, nor meet the runs of other surfaces."""
    found = f"run_thread-{thread}" if isinstance(thread, (str, int)) and not isinstance(thread, bool) else ""
    if RUN_ID_RE.fullmatch(found):
        return found
    return "run_threadh-" + hashlib.sha256(repr(thread).encode()).hexdigest()[:32]


def _waiting(tool: str, exc: ApprovalRequired) -> JSONObject:
    """The interrupt's value for a call waiting for an approval: what the application shows a person."""
    return {"reversi": "approval_required", "approval_id": exc.approval_id, "tool": tool, "reason": exc.message}


class _Journaled:
    """A tool node's answer, and what the step journals of it (`model_dump`, which the journal reads)."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer

    def model_dump(self, mode: str = "json") -> object:
        answer = self.answer
        if not isinstance(answer, ToolMessage):
            return answer  # a Command: journaled by its fields
        if answer.artifact is None and isinstance(answer.content, str):
            try:
                told = json.loads(answer.content)
            except ValueError:
                told = None
            if isinstance(told, dict):
                return told  # the tool's own dict, which the tool node made JSON text
        return answer.model_dump(mode=mode)


def _checked(answer: Answer) -> _Journaled:
    if isinstance(answer, ToolMessage) and answer.status == "error":
        raise _ToolError(answer)
    return _Journaled(answer)


def _instead(request: ToolCallRequest, exc: Refused | _ToolError) -> ToolMessage:
    """What the model reads for a call refused (nothing was called) or answered with an error."""
    if isinstance(exc, _ToolError):
        return exc.message
    call = request.tool_call
    return ToolMessage(refusal_text(exc.message), tool_call_id=call.get("id") or "", name=call["name"],
                       status="error")
