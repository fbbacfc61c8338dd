"""The inventory agent (issue 29) in each framework, with the framework's own offline model: it writes a
stock note, sets a row's stock and emails the supplier; the rollback, through the real fs and sql
connectors, puts the file and the row back byte for byte, and the email stays sent (tests/integrations/
inventory.py). On both stores. CrewAI's is in test_crewai.py (it runs in a virtualenv of its own)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import InMemoryRunner
from google.genai import types
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset
from tests.integrations.inventory import CALLS, NAMES, Shop
from tests.integrations.test_google_adk import ScriptedLlm
from tests.integrations.test_langchain_agents import OfflineModel
from tests.integrations.test_openai_agents import ScriptedModel

from reversi.integrations import google_adk, langchain_agents, openai_agents, pydantic_ai


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Shop:
    return Shop.make(tmp_path, monkeypatch)


def tools_of(shop: Shop) -> list[Any]:
    return [shop.write_file, shop.update_stock, shop.email_supplier]


def test_a_langchain_agent(shop: Shop, db_url: str) -> None:
    before = shop.state()
    asked = [AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"c{i}"}]) for i, (n, a) in enumerate(CALLS)]
    turns = iter([*asked, AIMessage("restocking asked for")])
    tools = [StructuredTool.from_function(f) for f in tools_of(shop)]
    with shop.open(db_url) as ledger:
        run = ledger.start_run(actor="inventory-agent")
        agent = create_agent(OfflineModel(messages=turns), tools=tools,
                             middleware=[langchain_agents.JournalMiddleware(run, names=NAMES)])
        agent.invoke({"messages": [{"role": "user", "content": "lamps are out: note it, fix the stock, reorder"}]})
        shop.check_rolled_back(run, before)


def test_an_openai_agents_sdk_agent(shop: Shop, db_url: str) -> None:
    before = shop.state()
    with shop.open(db_url) as ledger:
        run = ledger.start_run(actor="inventory-agent")
        tools = openai_agents.journaled([function_tool(f) for f in tools_of(shop)], run, names=NAMES)
        agent = Agent(name="inventory", model=ScriptedModel(list(CALLS)), tools=tools)
        asyncio.run(Runner.run(agent, "lamps are out", run_config=RunConfig(tracing_disabled=True)))
        shop.check_rolled_back(run, before)


def test_a_pydantic_ai_agent(shop: Shop, db_url: str) -> None:
    before = shop.state()

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
        if done < len(CALLS):
            name, args = CALLS[done]
            return ModelResponse(parts=[ToolCallPart(name, args, f"c{done}")])
        return ModelResponse(parts=[TextPart("restocking asked for")])

    with shop.open(db_url) as ledger:
        run = ledger.start_run(actor="inventory-agent")
        toolset = pydantic_ai.journaled(FunctionToolset(tools_of(shop)), run, names=NAMES)
        asyncio.run(PydanticAgent(FunctionModel(model)).run("lamps are out", toolsets=[toolset]))
        shop.check_rolled_back(run, before)


def test_a_google_adk_agent(shop: Shop, db_url: str) -> None:
    before = shop.state()

    async def converse(run: Any) -> None:
        agent = LlmAgent(name="inventory", model=ScriptedLlm(model="offline", script=list(CALLS)),
                         tools=tools_of(shop))
        runner = InMemoryRunner(app=App(name="inventory", root_agent=agent,
                                        plugins=[google_adk.JournalPlugin(run, names=NAMES)]))
        session = await runner.session_service.create_session(app_name="inventory", user_id="u1")
        message = types.Content(role="user", parts=[types.Part(text="lamps are out")])
        events: AsyncGenerator[Any, None] = runner.run_async(user_id="u1", session_id=session.id, new_message=message)
        [_ async for _ in events]

    with shop.open(db_url) as ledger:
        run = ledger.start_run(actor="inventory-agent")
        asyncio.run(converse(run))
        shop.check_rolled_back(run, before)
