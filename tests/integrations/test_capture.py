"""A manifest entry's `capture` through each framework's `journaled(..., capture=reader)` (issue 29,
item 4): the read is made before the call, and the plan's undo writes back what it read."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent as OpenAIAgent
from agents import RunConfig, Runner, function_tool
from langchain_core.tools import tool
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset
from tests.integrations.test_openai_agents import ScriptedModel

import reversi
from reversi.integrations import langchain, openai_agents, pydantic_ai

MANIFEST = """\
version: 1
tools:
  set_price:
    capture: {tool: get_price, args: {sku: "$args.sku"}}
    compensation: {tool: set_price, args: {sku: "$args.sku", price: "$before.price"}}
"""
prices = {"lamp": 30}


def set_price(sku: str, price: int) -> dict[str, Any]:
    """Set the price of an item."""
    prices[sku] = price
    return {"sku": sku, "price": price}


def get_price(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    assert tool == "get_price"
    return {"price": prices[args["sku"]]}


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    prices["lamp"] = 30
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    with reversi.open(f"sqlite:///{tmp_path}/r.db", manifests=[str(tmp_path / "tools.yaml")]) as opened:
        yield opened


def _undo_of(run: reversi.Run) -> Any:
    (action,) = run.plan().actions
    assert action.compensation is not None, action.reason
    return action.compensation.args


def test_langchain(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    (wrapped,) = langchain.journaled([tool(set_price)], run, capture=get_price)
    wrapped.invoke({"sku": "lamp", "price": 45})
    assert prices == {"lamp": 45} and _undo_of(run) == {"sku": "lamp", "price": 30}


def test_openai_agents(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    model = ScriptedModel([("set_price", {"sku": "lamp", "price": 45})])
    agent = OpenAIAgent(name="shop", model=model,
                        tools=openai_agents.journaled([function_tool(set_price)], run, capture=get_price))
    asyncio.run(Runner.run(agent, "raise the lamp's price", run_config=RunConfig(tracing_disabled=True)))
    assert prices == {"lamp": 45} and _undo_of(run) == {"sku": "lamp", "price": 30}


def test_pydantic_ai(ledger: reversi.Ledger) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            return ModelResponse(parts=[ToolCallPart("set_price", {"sku": "lamp", "price": 45}, "call-1")])
        return ModelResponse(parts=[TextPart("done")])

    run = ledger.start_run()
    tools = pydantic_ai.journaled(FunctionToolset([set_price]), run, capture=get_price)
    asyncio.run(Agent(FunctionModel(respond)).run("raise the lamp's price", toolsets=[tools]))
    assert prices == {"lamp": 45} and _undo_of(run) == {"sku": "lamp", "price": 30}
