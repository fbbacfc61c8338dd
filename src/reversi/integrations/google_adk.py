"""Google ADK: `JournalPlugin(run)` journals every tool call of the agents an ADK app runs.

    from google.adk.apps import App
    from reversi.integrations.google_adk import JournalPlugin

    run = ledger.start_run(run_id=f"run_{session_id}", actor="billing-agent")   # one run per session
    app = App(name="billing", root_agent=agent,
              plugins=[JournalPlugin(run, names={"create_charge": "stripe.create_charge"})])

No tool is wrapped: ADK hands each call to the plugin's `before_tool_callback` (journaled `intended`,
with the model's function call id), then to `after_tool_callback` (`succeeded`, with the tool's answer)
or `on_tool_error_callback` (`failed`, or `uncertain` for a timeout or a cancelled call; the error then
goes on as without Reversi). A refusal calls nothing: the before callback answers the call with
`{"error": TEXT}`, ADK's own shape for an error answer, and the model reads why. A call ADK holds for
confirmation (`require_confirmation`) pauses: its step stays open (`intended`), and the confirmed call,
run again under the same function call id, continues it; a rejected one is journaled `failed`.
Plugins run before the agents' own callbacks: a call that a later plugin or an agent's
`before_tool_callback` answers itself is journaled with that answer, though no tool ran; put this plugin
last among plugins that answer calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext

from reversi.core.json_values import LooseJSONObject
from reversi.engine.rollback import ReadBack
from reversi.engine.run import Run
from reversi.errors import BadInput, Refused
from reversi.integrations._journal import journaled_name, plain_arguments, refusal_text, usable_call_id

__all__ = ["JournalPlugin"]


class _Paused(Exception):
    """ADK holds the call for a person's confirmation: it waits, it did not fail."""


class _Rejected(Exception):
    """The person asked to confirm the call rejected it: the tool never ran."""


@dataclass
class _Pending:
    """A call journaled `intended` whose tool ADK is running: its outcome goes to `answer`, and `journal`
    (the `run.acall` making the call) writes it."""

    answer: asyncio.Future[Any]
    journal: asyncio.Task[Any]


class JournalPlugin(BasePlugin):
    """An ADK plugin (`App(..., plugins=[JournalPlugin(run)])`) that journals each tool call in `run`.

    Args:
        run: the run of this agent session (`ledger.start_run(run_id=...)` continues it by id).
        names: tool name -> the name to journal and look up in the manifests.
        capture: `capture(tool, arguments)` reads what a manifest entry's `capture` names before the
            call; None: the ledger's reader command, if configured, else nothing is read and the plan
            says so.
        name: the plugin's name in the app (ADK wants each plugin's name unique).

    Raises:
        BadInput: `run` is not a run, `names` not a mapping of names, or `capture` not callable.
    """

    def __init__(self, run: Run, *, names: Mapping[str, str] | None = None, capture: ReadBack | None = None,
                 name: str = "reversi") -> None:
        if not isinstance(run, Run):
            raise BadInput(f"JournalPlugin: give the run to journal the agent's calls in, not {type(run).__name__} "
                           f"{run!r:.60}")
        if names is not None and not (isinstance(names, Mapping)
                                      and all(isinstance(k, str) and isinstance(v, str) for k, v in names.items())):
            raise BadInput(f"JournalPlugin: names maps tool names to journaled names, not {names!r:.60}")
        if capture is not None and not callable(capture):
            raise BadInput(f"JournalPlugin: capture is a reader, capture(tool, arguments), not {capture!r:.60}")
        super().__init__(name)
        self.run, self.names, self.capture = run, dict(names or {}), capture
        self._pending: dict[int, _Pending] = {}

    async def before_tool_callback(self, *, tool: BaseTool, tool_args: LooseJSONObject,
                                   tool_context: ToolContext) -> LooseJSONObject | None:
        loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = loop.create_future()
        answer: asyncio.Future[Any] = loop.create_future()

        async def call(**_: Any) -> Any:
            started.set_result(None)  # journaled `intended`: ADK runs the tool now
            return await answer

        journal = asyncio.ensure_future(self.run.acall(
            journaled_name(self.names, tool.name), plain_arguments(tool_args), call, capture=self.capture,
            call_id=usable_call_id(tool_context.function_call_id), pauses=(_Paused,)))
        await asyncio.wait([started, journal], return_when=asyncio.FIRST_COMPLETED)
        if not started.done():  # refused (or the journal failed): nothing is called
            try:
                journal.result()
            except Refused as exc:
                return {"error": refusal_text(exc.message)}
            raise AssertionError("run.acall returned without making the call")  # pragma: no cover
        self._pending[id(tool_context)] = _Pending(answer, journal)
        return None

    async def after_tool_callback(self, *, tool: BaseTool, tool_args: LooseJSONObject, tool_context: ToolContext,
                                  result: LooseJSONObject) -> LooseJSONObject | None:
        pending = self._pending.pop(id(tool_context), None)
        if pending is None:
            return None  # a call this plugin refused, or answered by a callback before it
        confirmation = tool_context.tool_confirmation
        outcome: BaseException | None = None
        if tool_context.function_call_id in tool_context.actions.requested_tool_confirmations:
            outcome = _Paused()
        elif confirmation is not None and not confirmation.confirmed:
            outcome = _Rejected("the call was rejected when asked to confirm it")
        if outcome is None:
            pending.answer.set_result(result)
        else:
            pending.answer.set_exception(outcome)
        await _settled(pending.journal, outcome)
        return None

    async def on_tool_error_callback(self, *, tool: BaseTool, tool_args: LooseJSONObject, tool_context: ToolContext,
                                     error: Exception) -> LooseJSONObject | None:
        pending = self._pending.pop(id(tool_context), None)
        if pending is not None:
            pending.answer.set_exception(error)
            await _settled(pending.journal, error)
        return None  # the error goes on as without Reversi


async def _settled(journal: asyncio.Task[Any], handed: BaseException | None) -> None:
    """Wait for the outcome to be journaled. The exception handed to the call (the tool's own error, a
    pause) comes back out of it and is ADK's to deal with; any other is the journal's, and is raised."""
    try:
        await journal
    except BaseException as exc:
        if exc is handed or (isinstance(exc, asyncio.CancelledError) and isinstance(handed, asyncio.CancelledError)):
            return
        raise
