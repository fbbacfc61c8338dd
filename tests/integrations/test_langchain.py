"""LangChain tools, called by a tool-calling loop over the framework's fake chat model, are journaled
and rolled back; a refused call reaches the model as the tool's error message."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException, tool
from tests.integrations import billing

import reversi
from reversi.integrations.langchain import journaled

charged = billing.charged
NAMES = {"create_charge": "stripe.create_charge", "lookup_charge": "stripe.get_charge"}


create_charge = tool(billing.create_charge)


@tool
def lookup_charge(charge_id: str) -> str:
    """Read a charge."""
    return f"{charge_id}: paid"


class Prompts(BaseCallbackHandler):
    """What the model was shown, turn by turn."""

    def __init__(self) -> None:
        self.turns: list[list[BaseMessage]] = []

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        self.turns.append(messages[0])


def model_turns() -> GenericFakeChatModel:
    calls = [{"name": "create_charge", "args": {"amount": 700, "order_id": "o-1"}, "id": "c1"},
             {"name": "lookup_charge", "args": {"charge_id": "ch_o-1"}, "id": "c2"}]
    return GenericFakeChatModel(messages=iter([AIMessage("", tool_calls=calls), AIMessage("all done")]))


async def agent_loop(tools: list[BaseTool], prompts: Prompts) -> list[BaseMessage]:
    """The classic tool-calling loop: ask the model, run the tool calls it makes, hand back the answers."""
    model, by_name = model_turns(), {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage("charge order o-1")]
    while True:
        reply = await model.ainvoke(messages, config={"callbacks": [prompts]})
        messages.append(reply)
        if not isinstance(reply, AIMessage) or not reply.tool_calls:
            return messages
        for call in reply.tool_calls:
            messages.append(await by_name[call["name"]].ainvoke(call))


def test_an_agents_tool_calls_are_journaled_and_rolled_back(sqlite_ledger: reversi.Ledger) -> None:
    charged.clear()
    run = sqlite_ledger.start_run(run_id="run_thread-1", actor="billing-agent")
    prompts = Prompts()
    messages = asyncio.run(agent_loop(journaled([create_charge, lookup_charge], run, names=NAMES), prompts))
    assert charged == [700] and messages[-1].content == "all done"
    answers = [m for m in prompts.turns[-1] if isinstance(m, ToolMessage)]
    assert [a.status for a in answers] == ["success", "success"] and "ch_o-1: paid" in str(answers[1].content)
    steps = sqlite_ledger.continue_run("run_thread-1").steps()
    assert [(s.tool, s.args, s.status.value) for s in steps] == [
        ("stripe.create_charge", {"amount": 700, "order_id": "o-1"}, "succeeded"),
        ("stripe.get_charge", {"charge_id": "ch_o-1"}, "succeeded"),
    ]
    report = run.rollback(compensate=lambda call: {"refund": call["args"]})
    assert report.compensated == [0] and report.skipped == [1] and report.complete


def test_a_halt_refuses_the_tool_and_the_model_reads_why(sqlite_ledger: reversi.Ledger) -> None:
    charged.clear()
    sqlite_ledger.add_halt("card processor incident", tool="stripe.create_charge")
    run = sqlite_ledger.start_run(actor="billing-agent")
    prompts = Prompts()
    asyncio.run(agent_loop(journaled([create_charge, lookup_charge], run, names=NAMES), prompts))
    assert charged == []
    refused, read = [m for m in prompts.turns[-1] if isinstance(m, ToolMessage)]
    assert refused.status == "error" and "card processor incident" in str(refused.content)
    assert read.status == "success"
    assert [s.tool for s in run.steps()] == ["stripe.get_charge"]


def test_a_sync_call_is_journaled_too(sqlite_ledger: reversi.Ledger) -> None:
    run = sqlite_ledger.start_run(actor="billing-agent")
    [wrapped] = journaled([lookup_charge], run, names=NAMES)
    assert wrapped.invoke({"charge_id": "ch_9"}) == "ch_9: paid"
    assert [(s.tool, s.status.value) for s in run.steps()] == [("stripe.get_charge", "succeeded")]


def test_a_tools_own_error_is_journaled_failed_then_handled_as_the_tool_says(sqlite_ledger: reversi.Ledger) -> None:
    @tool
    def send_email(to: str) -> str:
        """Email a customer."""
        raise ToolException(f"no mailbox {to}")

    send_email.handle_tool_error = True
    run = sqlite_ledger.start_run(actor="billing-agent")
    [wrapped] = journaled([send_email], run)
    answer = wrapped.invoke({"name": "send_email", "args": {"to": "a@b.c"}, "id": "c9", "type": "tool_call"})
    assert isinstance(answer, ToolMessage) and answer.status == "error" and answer.content == "no mailbox a@b.c"
    [step] = run.steps()
    assert (step.status.value, step.error) == ("failed", "no mailbox a@b.c")
    send_email.handle_tool_error = False
    [unhandled] = journaled([send_email], run)
    with pytest.raises(ToolException):
        unhandled.invoke({"to": "d@e.f"})


class Search(BaseTool):
    """A tool of the older kind: a subclass with no argument schema, called with one text."""

    name: str = "search"
    description: str = "Search the tickets."

    def _run(self, query: str) -> str:
        return f"3 tickets about {query}"


def test_a_tool_with_no_schema_keeps_the_one_its_signature_gives_and_takes_text(sqlite_ledger: reversi.Ledger) -> None:
    run = sqlite_ledger.start_run(actor="billing-agent")
    [wrapped] = journaled([Search()], run)
    assert wrapped.args == Search().args == {"query": {"title": "Query", "type": "string"}}
    assert wrapped.invoke({"query": "refunds"}) == "3 tickets about refunds"
    assert wrapped.invoke("invoices") == "3 tickets about invoices"
    assert [s.args for s in run.steps()] == [{"query": "refunds"}, {"input": "invoices"}]
