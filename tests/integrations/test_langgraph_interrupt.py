"""A LangGraph `interrupt()` inside a journaled LangChain tool (issue 29, item 2): the pause is not a
failure, so the step stays open (`unresolved` in a plan) while the graph waits; when the graph resumes,
the tool runs again under the same tool call id and continues that step, rather than leaving a
`failed` step and adding a second one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt

import reversi
from reversi.integrations.langchain import journaled

stock = {"lamp": 3}


@tool
def remove_item(item: str) -> str:
    """Remove an item from stock, once a person agrees."""
    if interrupt({"question": f"remove {item}?"}) != "yes":
        return "kept"
    return f"removed {stock.pop(item)} x {item}"


def _graph(run: reversi.Run) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(journaled([remove_item], run)))
    builder.set_entry_point("tools")
    return builder.compile(checkpointer=InMemorySaver())


def test_an_interrupted_call_stays_open_and_the_resumed_call_continues_its_step(tmp_path: Path) -> None:
    stock["lamp"] = 3
    (tmp_path / "tools.yaml").write_text("version: 1\ntools:\n  remove_item:\n    compensation:\n"
                                         "      tool: restock\n      args: {item: \"$args.item\"}\n")
    with reversi.open(f"sqlite:///{tmp_path}/r.db", manifests=[str(tmp_path / "tools.yaml")]) as ledger:
        run = ledger.start_run(run_id="run_thread-1")
        graph, config = _graph(run), {"configurable": {"thread_id": "thread-1"}}
        asked = AIMessage("", tool_calls=[{"name": "remove_item", "args": {"item": "lamp"}, "id": "call-1"}])
        paused = graph.invoke({"messages": [asked]}, config)
        assert paused["__interrupt__"][0].value == {"question": "remove lamp?"}
        (step,) = run.steps()
        assert (step.status.value, step.call_id) == ("intended", "call-1") and stock == {"lamp": 3}
        assert run.plan().actions[0].kind.value == "unresolved"
        done = graph.invoke(Command(resume="yes"), config)
        assert done["messages"][-1].content == "removed 3 x lamp"
        (step,) = run.steps()  # one step: the resumed call continued it
        assert (step.status.value, step.result) == ("succeeded", "removed 3 x lamp")
        assert run.rollback(lambda call: {"ok": True}).compensated == [0]
