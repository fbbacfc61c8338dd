"""A LangChain tool that takes the model's tool call id injected (`InjectedToolCallId`, the usual way
to answer with a `ToolMessage` or a `Command`) runs through the wrapper as it runs without it (issue
29, item 3): it crashed with "must always be invoked with a full model ToolCall"."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, tool

import reversi
from reversi.integrations.langchain import journaled


@tool
def restock(sku: str, count: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
    """Put items back in stock."""
    return ToolMessage(f"{count} x {sku} back", tool_call_id=tool_call_id, artifact={"sku": sku, "count": count})


def test_an_injected_call_id_reaches_the_tool_and_is_not_journaled_as_an_argument(tmp_path: Path) -> None:
    call = {"name": "restock", "args": {"sku": "lamp", "count": 2}, "id": "call-7", "type": "tool_call"}
    assert restock.invoke(call).content == "2 x lamp back"  # without Reversi
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        run = ledger.start_run()
        (wrapped,) = journaled([restock], run)
        answer = wrapped.invoke(call)
        assert isinstance(answer, ToolMessage) and (answer.content, answer.tool_call_id) == ("2 x lamp back", "call-7")
        again = asyncio.run(wrapped.ainvoke({**call, "id": "call-8"}))
        assert again.tool_call_id == "call-8"
        steps = run.steps()
    assert [s.args for s in steps] == [{"sku": "lamp", "count": 2}] * 2
    assert steps[0].result["content"] == "2 x lamp back" and steps[0].result["artifact"] == {"sku": "lamp", "count": 2}
