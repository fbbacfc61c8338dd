"""Pydantic AI calls that pause (issue 29, items 1 and 2), driven by its offline FunctionModel: a
deferred call and one waiting for approval leave their step open, so the plan says `unresolved` and
no rollback claims `complete` over them; the approved call continues its own step when the agent
resumes; a deferred answer or a denial is journaled on the step by `settle_deferred`."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import (
    Agent,
    ApprovalRequired,
    CallDeferred,
    DeferredToolRequests,
    DeferredToolResults,
    RunContext,
    ToolDenied,
)
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

import reversi
from reversi.integrations.pydantic_ai import journaled, settle_deferred

stock = {"lamp": 3}


def reserve(item: str) -> None:
    """Reserved by a warehouse system that answers later: deferred."""
    raise CallDeferred


def remove_item(ctx: RunContext[None], item: str) -> dict[str, Any]:
    """Removes an item from stock, once a person approves."""
    if not ctx.tool_call_approved:
        raise ApprovalRequired
    return {"removed": item, "left": stock.pop(item)}


def model_calling(tool: str) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart(tool, {"item": "lamp"}, "call-1")])
        return ModelResponse(parts=[TextPart(f"done: {returns[-1].model_response_str()}")])

    return FunctionModel(respond)


def _agent(tool: str) -> Agent[None, str | DeferredToolRequests]:
    return Agent(model_calling(tool), output_type=[str, DeferredToolRequests])


def _undo(call: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


MANIFEST = """\
version: 1
tools:
  reserve:
    compensation: {tool: release, args: {item: "$args.item"}}
  remove_item:
    compensation: {tool: restock, args: {item: "$result.removed", count: "$result.left"}}
"""


def _ledger(tmp_path: Any) -> reversi.Ledger:
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    return reversi.open(f"sqlite:///{tmp_path}/r.db", manifests=[str(tmp_path / "tools.yaml")])


def test_a_deferred_call_stays_open_until_its_answer_is_settled(tmp_path: Any) -> None:
    with _ledger(tmp_path) as ledger:
        run = ledger.start_run()
        tools = journaled(FunctionToolset([reserve]), run)
        first = asyncio.run(_agent("reserve").run("reserve a lamp", toolsets=[tools]))
        assert isinstance(first.output, DeferredToolRequests) and first.output.calls[0].tool_call_id == "call-1"
        (step,) = run.steps()
        assert step.status.value == "intended" and step.call_id == "call-1"
        (action,) = run.plan().actions
        assert action.kind.value == "unresolved"  # not "skip: never took effect"
        report = run.rollback(_undo)
        assert not report.complete and report.unresolved == [0]
        results = DeferredToolResults(calls={"call-1": {"reservation": "r-7"}})
        assert asyncio.run(settle_deferred(run, results)) == [0]
        resumed = asyncio.run(_agent("reserve").run(message_history=first.all_messages(), toolsets=[tools],
                                                    deferred_tool_results=results))
        assert resumed.output == 'done: {"reservation":"r-7"}'
        (step,) = run.steps()
        assert (step.status.value, step.result) == ("succeeded", {"reservation": "r-7"})
        assert run.rollback(_undo).compensated == [0]


def test_an_approved_call_continues_its_own_step_and_a_denied_one_is_journaled_failed(tmp_path: Any) -> None:
    stock["lamp"] = 3
    with _ledger(tmp_path) as ledger:
        run = ledger.start_run()
        tools = journaled(FunctionToolset([remove_item]), run)
        first = asyncio.run(_agent("remove_item").run("remove the lamp", toolsets=[tools]))
        assert isinstance(first.output, DeferredToolRequests) and len(first.output.approvals) == 1
        assert [s.status.value for s in run.steps()] == ["intended"] and stock == {"lamp": 3}
        approved = DeferredToolResults(approvals={"call-1": True})
        assert asyncio.run(settle_deferred(run, approved)) == []  # nothing to journal: the call resumes
        asyncio.run(_agent("remove_item").run(message_history=first.all_messages(), toolsets=[tools],
                                             deferred_tool_results=approved))
        (step,) = run.steps()  # one step: the resumed call continued it
        assert (step.status.value, step.result) == ("succeeded", {"removed": "lamp", "left": 3})
        assert run.plan().actions[0].compensation is not None

        other = ledger.start_run()
        tools = journaled(FunctionToolset([remove_item]), other)
        stock["lamp"] = 3
        first = asyncio.run(_agent("remove_item").run("remove the lamp", toolsets=[tools]))
        denied = DeferredToolResults(approvals={"call-1": ToolDenied("not during the sale")})
        assert asyncio.run(settle_deferred(other, denied)) == [0]
        asyncio.run(_agent("remove_item").run(message_history=first.all_messages(), toolsets=[tools],
                                             deferred_tool_results=denied))
        (step,) = other.steps()
        assert (step.status.value, step.error) == ("failed", "approval denied: not during the sale")
        assert stock == {"lamp": 3} and other.plan().actions[0].reason == "never took effect"


def test_the_capability_covers_the_agents_own_tools(tmp_path: Any) -> None:
    """`Journaled(run)` as a capability journals `@agent.tool` tools, which no toolset wrapper reaches."""
    from reversi.integrations.pydantic_ai import Journaled

    with _ledger(tmp_path) as ledger:
        run = ledger.start_run()
        agent = Agent(model_calling("reserve_now"), capabilities=[Journaled(run, names={"reserve_now": "reserve"})])

        @agent.tool_plain
        def reserve_now(item: str) -> dict[str, str]:
            """Reserve an item at once."""
            return {"reservation": f"r-{item}"}

        output = asyncio.run(agent.run("reserve a lamp")).output
        assert output == 'done: {"reservation":"r-lamp"}'
        (step,) = run.steps()
        assert (step.tool, step.args, step.call_id) == ("reserve", {"item": "lamp"}, "call-1")
        assert run.plan().actions[0].compensation is not None
