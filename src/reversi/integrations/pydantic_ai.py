"""Pydantic AI: `journaled(toolset, run)` journals every call an agent makes to the toolset's tools.

    from reversi.integrations.pydantic_ai import journaled

    run = ledger.start_run(run_id=f"run_{session_id}", actor="billing-agent")   # one run per session
    result = await agent.run(prompt, toolsets=[journaled(billing_tools, run)])

A refusal (a halt, a duplicate, an approval to wait for) reaches the model as the tool's failure
(`ToolFailed`): it reads the reason and nothing is called.

To cover every tool of an agent (its `@agent.tool` functions included) without wrapping toolsets one
by one, give it the capability instead: `Agent(model, capabilities=[Journaled(run)])`.

A call that pauses (`ApprovalRequired`, `CallDeferred`) is not a failure: its step stays open
(`intended`, so a rollback plans it `unresolved`, never "never took effect"). When the agent resumes
with approvals, the approved call continues that same step. Before resuming, hand the results to
`settle_deferred(run, results)`: it journals the answers of deferred calls, and the calls denied, on
their steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import (
    ApprovalRequired,
    CallDeferred,
    DeferredToolResults,
    ModelRetry,
    RunContext,
    ToolApproved,
    ToolDenied,
    ToolFailed,
    ToolReturn,
)
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool, WrapperToolset

from reversi.core.json_values import LooseJSONObject
from reversi.engine.rollback import ReadBack
from reversi.engine.run import Run
from reversi.errors import BadInput, Refused
from reversi.integrations._journal import journaled_name, plain_arguments, refusal_text, usable_call_id

__all__ = ["Journaled", "JournaledToolset", "journaled", "settle_deferred"]


@dataclass
class JournaledToolset(WrapperToolset[AgentDepsT]):
    """A toolset whose calls go through `run`: `intended` before, the outcome after."""

    run: Run
    names: Mapping[str, str] = field(default_factory=dict)
    capture: ReadBack | None = None

    async def call_tool(
        self, name: str, tool_args: LooseJSONObject, ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        async def call(**_: Any) -> Any:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)

        try:
            return await self.run.acall(journaled_name(self.names, name), plain_arguments(tool_args), call,
                                        call_id=usable_call_id(ctx.tool_call_id), pauses=_PAUSES,
                                        capture=self.capture)
        except Refused as exc:
            raise ToolFailed(refusal_text(exc.message)) from exc


@dataclass
class Journaled(AbstractCapability[AgentDepsT]):
    """A capability that journals every tool call of the agent in `run`: its `@agent.tool` tools, its
    toolsets, MCP servers, all of them, as `journaled` does for one toolset.

        agent = Agent(model, capabilities=[Journaled(run, names={"charge": "stripe.create_charge"})])
    """

    run: Run | None = None
    names: Mapping[str, str] = field(default_factory=dict)
    capture: ReadBack | None = None

    def get_wrapper_toolset(self, toolset: AbstractToolset[AgentDepsT]) -> AbstractToolset[AgentDepsT] | None:
        if self.run is None:
            raise BadInput("Journaled: give the run to journal the agent's calls in (Journaled(run))")
        return JournaledToolset(toolset, self.run, dict(self.names), self.capture)


_PAUSES = (ApprovalRequired, CallDeferred)  # how Pydantic AI says a call waits: it did not fail


async def settle_deferred(run: Run, results: DeferredToolResults) -> list[int]:
    """Journal what `results` (for `agent.run(..., deferred_tool_results=results)`) say of the calls that
    paused in `run`, before the agent resumes: each deferred call's answer (`succeeded`; `failed` for a
    `ModelRetry` or a denial), and each approval denied, or granted with other arguments (the call made
    with them is a step of its own), as `failed`: the paused call never ran. An approval granted as asked
    leaves the step open, for the resumed call to continue. Returns the steps settled.

    Raises:
        NotFound: a call id names no open step of the run.
    """
    settled = []
    for call_id, answer in results.calls.items():
        if isinstance(answer, ModelRetry | ToolDenied):
            said = answer.message
            step = await run.asettle(call_id, error=said if isinstance(answer, ModelRetry) else f"denied: {said}")
        else:
            value = answer.return_value if isinstance(answer, ToolReturn) else answer
            step = await run.asettle(call_id, result=plain_arguments({"result": value})["result"])
        settled.append(step.index)
    for call_id, approval in results.approvals.items():
        if approval is True or (isinstance(approval, ToolApproved) and approval.override_args is None):
            continue
        why = (f"approval denied: {approval.message}" if isinstance(approval, ToolDenied)
               else "approval denied" if approval is False else "approved with other arguments: made as a new step")
        settled.append((await run.asettle(call_id, error=why)).index)
    return settled


def journaled(
    toolset: AbstractToolset[AgentDepsT] | Sequence[Callable[..., Any]], run: Run, *,
    names: Mapping[str, str] | None = None, capture: ReadBack | None = None,
) -> JournaledToolset[AgentDepsT]:
    """Wrap `toolset` so that each call is journaled in `run`.

    Args:
        toolset: any Pydantic AI toolset (a `FunctionToolset`, an MCP server, a combined one), or a list
            of tool functions, made a `FunctionToolset`.
        run: the run of this agent session (`ledger.start_run(run_id=...)` continues it by id).
        names: tool name -> the name to journal and look up in the manifests (`{"charge": "stripe.create_charge"}`).
        capture: `capture(tool, arguments)` reads what a manifest entry's `capture` names before the
            call; None: the ledger's reader command, if configured, else nothing is read and the plan
            says so.
    """
    return JournaledToolset(_as_toolset(toolset), run, dict(names or {}), capture)


def _as_toolset(given: object) -> AbstractToolset[Any]:
    if isinstance(given, AbstractToolset):
        return given
    if isinstance(given, list | tuple) and all(callable(f) and not isinstance(f, type) for f in given):
        return FunctionToolset(list(given))
    raise BadInput(f"journaled: {type(given).__name__} {given!r:.60} is neither a Pydantic AI toolset nor a list of "
                   "tool functions")
