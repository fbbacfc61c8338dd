"""Pydantic AI: `journaled(toolset, run)` journals every call an agent makes to the toolset's tools.

    from reversi.integrations.pydantic_ai import journaled

    run = ledger.start_run(run_id=f"run_{session_id}", actor="billing-agent")   # one run per session
    result = await agent.run(prompt, toolsets=[journaled(billing_tools, run)])

A refusal (a halt, a duplicate, an approval to wait for) reaches the model as the tool's failure
(`ToolFailed`): it reads the reason and nothing is called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext, ToolFailed
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset

from reversi.engine.run import Run
from reversi.errors import Refused
from reversi.integrations._journal import journaled_name, plain_arguments, refusal_text

__all__ = ["JournaledToolset", "journaled"]


@dataclass
class JournaledToolset(WrapperToolset[AgentDepsT]):
    """A toolset whose calls go through `run`: `intended` before, the outcome after."""

    run: Run
    names: Mapping[str, str] = field(default_factory=dict)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        async def call(**_: Any) -> Any:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)

        try:
            return await self.run.acall(journaled_name(self.names, name), plain_arguments(tool_args), call)
        except Refused as exc:
            raise ToolFailed(refusal_text(exc.message)) from exc


def journaled(
    toolset: AbstractToolset[AgentDepsT], run: Run, *, names: Mapping[str, str] | None = None
) -> JournaledToolset[AgentDepsT]:
    """Wrap `toolset` so that each call is journaled in `run`.

    Args:
        toolset: any Pydantic AI toolset (a `FunctionToolset`, an MCP server, a combined one).
        run: the run of this agent session (`ledger.start_run(run_id=...)` continues it by id).
        names: tool name -> the name to journal and look up in the manifests (`{"charge": "stripe.create_charge"}`).
    """
    return JournaledToolset(toolset, run, dict(names or {}))
