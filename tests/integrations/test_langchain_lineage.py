"""Two LangChain agents set the same price through the sql connector, one after the other (500 → 600 →
700). Rolling back the first run alone must not put 500 back under the second's 700: its plan says which
run holds it back, through which row. An incident rollback of both (by actor, with the real CLI and the
connector as compensator) undoes the second first, then the first, and the price is 500 again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, tool
from tests.connectors.conftest import COMPENSATOR, READER, reversi_cli
from tests.connectors.test_sql import SCHEMA, SEED, Target

import reversi
from reversi.connectors import sql
from reversi.integrations.langchain import journaled

MANIFEST = sql.CONNECTOR.manifest_path()


@tool
def set_price(item_id: int, price: int) -> dict[str, Any]:
    """Set an item's price in the shop's database."""
    return sql.update(db="shop", table="items", key={"id": item_id}, values={"price": price})


async def agent(tools: list[BaseTool], price: int) -> list[BaseMessage]:
    """A tool-calling loop over LangChain's fake chat model, which asks for one price change."""
    calls = [{"name": "set_price", "args": {"item_id": 1, "price": price}, "id": f"c{price}"}]
    model = GenericFakeChatModel(messages=iter([AIMessage("", tool_calls=calls), AIMessage("done")]))
    by_name = {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage(f"set the price of item 1 to {price}")]
    while True:
        reply = await model.ainvoke(messages)
        messages.append(reply)
        if not isinstance(reply, AIMessage) or not reply.tool_calls:
            return messages
        for call in reply.tool_calls:
            messages.append(await by_name[call["name"]].ainvoke(call))


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Target:
    found = Target("sqlite", f"sqlite:///{tmp_path}/shop.db")
    found.execute(*SCHEMA["sqlite"], *SEED, "UPDATE items SET price = 500 WHERE id = 1")
    return found.configure(monkeypatch)


def price(shop: Target) -> Any:
    return next(row[3] for row in shop.rows()["items"] if row[0] == 1)


def test_overlapping_agent_runs_are_held_back_then_rolled_back_together(db_url: str, shop: Target) -> None:
    with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
        for run_id, value in (("run_0", 600), ("run_1", 700)):
            run = ledger.start_run(run_id=run_id, actor="pricing-agent")
            tools = journaled([set_price], run, names={"set_price": "sql.update"})
            assert asyncio.run(agent(tools, value))[-1].content == "done"
    assert price(shop) == 700

    plan = reversi_cli("--db", db_url, "plan", "run_0", "-m", str(MANIFEST), "--json")
    assert plan.code == 2, plan.err
    (action,) = plan.json()["actions"]
    assert action["kind"] == "defer" and action["blocked_by"] == []
    assert action["blocked_by_runs"] == [{"run": "run_1", "step": 0, "resource": 'row:shop:items:{"id":1}'}]

    alone = reversi_cli("--db", db_url, "rollback", "run_0", "-m", str(MANIFEST), "--json",
                        "--compensator-cmd", COMPENSATOR, "--reader-cmd", READER)
    assert alone.code == 2 and alone.json()["compensated"] == [] and price(shop) == 700  # nothing put back under it

    both = reversi_cli("--db", db_url, "rollback", "--actor", "pricing-agent", "-m", str(MANIFEST), "--json",
                       "--compensator-cmd", COMPENSATOR, "--reader-cmd", READER)
    assert both.code == 0, both.err
    report = both.json()
    assert report["complete"] and report["compensated"] == [{"run": "run_0", "step": 0}, {"run": "run_1", "step": 0}]
    assert price(shop) == 500
    assert reversi_cli("--db", db_url, "show", "run_1", "--json").json()["steps"][0]["status"] == "compensated"
