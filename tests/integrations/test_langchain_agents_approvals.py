"""`JournalMiddleware` (issue 29): a call that waits for a person's approval pauses the LangGraph agent with
`interrupt()`; the decision is made in Reversi and the resumed graph tries the call again (approved: it
runs once; denied: the model reads why; still pending: it pauses again). Each thread is a run of its own.
Driven by LangChain's offline fake chat model, with LangGraph's in-memory checkpointer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import reversi
from reversi.errors import BadInput, Conflict
from reversi.integrations.langchain_agents import JournalMiddleware, thread_run_id

paid: list[int] = []


@tool
def payout(amount: int) -> str:
    """Pay a supplier."""
    paid.append(amount)
    return f"paid {amount}"


@tool
async def apayout(amount: int) -> str:
    """Pay a supplier (async)."""
    paid.append(amount)
    return f"paid {amount}"


class OfflineModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> OfflineModel:
        return self


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    (tmp_path / "tools.yaml").write_text("version: 1\ntools:\n  payout: {requires_approval: true, irreversible: true}\n"
                                         "  apayout: {requires_approval: true, irreversible: true}\n")
    paid.clear()
    with reversi.open(f"sqlite:///{tmp_path}/r.db", manifests=[str(tmp_path / "tools.yaml")]) as opened:
        yield opened


def agent(middleware: JournalMiddleware, name: str = "payout", *, saved: bool = True) -> Any:
    turns = iter([AIMessage("", tool_calls=[{"name": name, "args": {"amount": 90}, "id": "c1"}]), AIMessage("done")])
    chosen = payout if name == "payout" else apayout
    return create_agent(OfflineModel(messages=turns), tools=[chosen], middleware=[middleware],
                        checkpointer=InMemorySaver() if saved else None)


ASK = {"messages": [{"role": "user", "content": "pay the supplier"}]}


def waiting(state: dict[str, Any]) -> dict[str, Any]:
    (paused,) = state["__interrupt__"]
    assert isinstance(paused.value, dict)
    return paused.value


def test_an_approval_pauses_the_graph_and_the_approved_call_runs_once_on_resume(ledger: reversi.Ledger) -> None:
    graph = agent(JournalMiddleware.per_thread(ledger, actor="ops-agent"))
    config = {"configurable": {"thread_id": "t-7"}}
    first = graph.invoke(ASK, config)
    asked = waiting(first)
    assert (asked["reversi"], asked["tool"]) == ("approval_required", "payout")
    assert asked["reason"].startswith("approval required") and paid == []

    again = graph.invoke(Command(resume="checked"), config)  # resumed before anyone decided: it waits again
    assert waiting(again)["approval_id"] == asked["approval_id"] and paid == []

    ledger.approve(asked["approval_id"], by="dana", note="invoice checked")
    done = graph.invoke(Command(resume="approved"), config)
    assert "__interrupt__" not in done and paid == [90]
    (answer,) = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "success" and answer.content == "paid 90"
    run = ledger.get_run("run_thread-t-7")
    assert run.actor == "ops-agent"
    assert [(s.tool, s.status.value, s.call_id) for s in run.steps()] == [("payout", "succeeded", "c1")]


def test_a_denied_approval_reaches_the_model_and_nothing_is_paid(ledger: reversi.Ledger) -> None:
    graph, config = agent(JournalMiddleware.per_thread(ledger)), {"configurable": {"thread_id": "t-8"}}
    asked = waiting(graph.invoke(ASK, config))
    ledger.deny(asked["approval_id"], by="dana", note="wrong supplier")
    done = graph.invoke(Command(resume="decided"), config)  # resume=None trips a LangGraph bug (1.2.x)
    (answer,) = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "error" and "approval denied: wrong supplier" in str(answer.content)
    assert paid == [] and ledger.get_run("run_thread-t-8").steps() == ()


def test_async_agents_pause_the_same_way(ledger: reversi.Ledger) -> None:
    graph, config = agent(JournalMiddleware.per_thread(ledger), "apayout"), {"configurable": {"thread_id": "t-9"}}

    async def go() -> None:
        asked = waiting(await graph.ainvoke(ASK, config))
        await asyncio.to_thread(ledger.approve, asked["approval_id"], by="dana")
        done = await graph.ainvoke(Command(resume=True), config)
        assert "__interrupt__" not in done

    asyncio.run(go())
    assert paid == [90]


def test_with_approvals_refuse_the_model_reads_the_refusal(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    done = agent(JournalMiddleware(run, approvals="refuse")).invoke(ASK, {"configurable": {"thread_id": "x"}})
    (answer,) = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "error" and "approval required" in str(answer.content) and paid == []


def test_threads_are_runs_of_their_own_and_odd_thread_ids_are_digested(ledger: reversi.Ledger) -> None:
    assert thread_run_id("t-1") == "run_thread-t-1" and thread_run_id(42) == "run_thread-42"
    for hostile in ("../x", "a b", "x" * 300, "\u202e", True, None):
        made = thread_run_id(hostile)
        assert made.startswith("run_threadh-") and len(made) == len("run_threadh-") + 32
    ledger.start_run(run_id="run_thread-t-9", actor="support-bot")  # another agent's thread
    with pytest.raises(Conflict, match="belongs to actor 'support-bot'"):
        agent(JournalMiddleware.per_thread(ledger, actor="billing-bot")).invoke(
            ASK, {"configurable": {"thread_id": "t-9"}})
    assert ledger.get_run("run_thread-t-9").steps() == () and paid == []
    graph = agent(JournalMiddleware.per_thread(ledger), saved=False)
    with pytest.raises(BadInput, match="without a thread id"):
        graph.invoke(ASK)
    with pytest.raises(BadInput, match="approvals must be"):
        JournalMiddleware(None, approvals="ask")  # type: ignore[arg-type]
