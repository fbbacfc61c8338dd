"""A Pydantic AI agent, driven by its offline FunctionModel, calls journaled tools; the run rolls back."""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset
from tests.integrations import billing
from tests.integrations.conftest import refund
from tests.otel_spans import in_memory_spans

import reversi
from reversi.integrations.pydantic_ai import journaled

charged = billing.charged


create_charge = billing.create_charge


def billing_tools() -> FunctionToolset[object]:
    return FunctionToolset([create_charge])


def charge_then_report(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: charge once, then say what the tool answered."""
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("create_charge", {"amount": 700, "order_id": "o-1"}, "call-1")])
    return ModelResponse(parts=[TextPart(f"tool said: {returns[-1].model_response_str()}")])


def run_agent(run: reversi.Run) -> str:
    agent = Agent(FunctionModel(charge_then_report))
    names = {"create_charge": "stripe.create_charge"}
    result = asyncio.run(agent.run("charge order o-1", toolsets=[journaled(billing_tools(), run, names=names)]))
    return str(result.output)


def test_an_agents_tool_call_is_journaled_and_rolled_back(sqlite_ledger: reversi.Ledger) -> None:
    charged.clear()
    run = sqlite_ledger.start_run(run_id="run_session-1", actor="billing-agent")
    output = run_agent(run)
    assert "ch_o-1" in output and charged == [700]
    again = sqlite_ledger.continue_run("run_session-1")  # the session's run, continued by id
    [step] = again.steps()
    assert (step.tool, step.args, step.status.value) == ("stripe.create_charge", {"amount": 700, "order_id": "o-1"},
                                                         "succeeded")
    report = again.rollback(compensate=refund)
    assert report.compensated == [0] and report.complete


def test_a_halt_refuses_the_tool_and_the_model_reads_why(sqlite_ledger: reversi.Ledger) -> None:
    charged.clear()
    sqlite_ledger.add_halt("card processor incident", tool="stripe.*")
    run = sqlite_ledger.start_run(actor="billing-agent")
    output = run_agent(run)
    assert charged == []
    assert "card processor incident" in output and "nothing was done" in output
    assert run.steps() == () and run.events()[-1].type == "refused"


def test_the_call_span_sits_under_pydantic_ais_own_tool_span_and_its_trace_is_journaled(
    sqlite_ledger: reversi.Ledger,
) -> None:
    spans = in_memory_spans()
    run = sqlite_ledger.start_run(actor="billing-agent")
    agent = Agent(FunctionModel(charge_then_report), capabilities=[Instrumentation()])
    asyncio.run(agent.run("charge order o-1", toolsets=[journaled(billing_tools(), run)]))
    by_name = {s.name: s for s in spans.get_finished_spans()}
    call, tool_span = by_name["reversi.call create_charge"], by_name["execute_tool create_charge"]
    assert call.parent is not None and tool_span.context is not None and call.context is not None
    assert call.parent.span_id == tool_span.context.span_id
    intended = next(e for e in run.events() if e.type == "intended")
    assert intended.data["trace_id"] == format(call.context.trace_id, "032x")


def test_a_refused_call_carries_the_trace_of_the_tool_span_it_was_refused_in(sqlite_ledger: reversi.Ledger) -> None:
    spans = in_memory_spans()
    sqlite_ledger.add_halt("card processor incident", tool="stripe.*")
    run = sqlite_ledger.start_run(actor="billing-agent")
    agent = Agent(FunctionModel(charge_then_report), capabilities=[Instrumentation()])
    names = {"create_charge": "stripe.create_charge"}
    asyncio.run(agent.run("charge order o-1", toolsets=[journaled(billing_tools(), run, names=names)]))
    tool_span = next(s for s in spans.get_finished_spans() if s.name == "execute_tool create_charge")
    refused = next(e for e in run.events() if e.type == "refused")
    assert tool_span.context is not None and refused.data["trace_id"] == format(tool_span.context.trace_id, "032x")
