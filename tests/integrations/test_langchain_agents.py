"""LangChain 1.x `create_agent` with `JournalMiddleware` (issue 29): every tool call journaled without
wrapping tools one by one, driven by LangChain's offline fake chat model; a refusal reaches the model as
an error `ToolMessage`; a tool error the tool node handles is journaled `failed`; the run rolls back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import ToolException, tool

import reversi
from reversi.integrations.langchain_agents import JournalMiddleware

charged: list[int] = []


@tool
def create_charge(amount: int, order_id: str) -> dict[str, Any]:
    """Charge a customer."""
    charged.append(amount)
    return {"id": f"ch_{order_id}", "amount": amount}


@tool
def send_email(to: str) -> str:
    """Email a customer."""
    raise ToolException("smtp refused the recipient")


send_email.handle_tool_error = True  # the tool answers its own error as an error ToolMessage

class OfflineModel(GenericFakeChatModel):
    """LangChain's fake chat model, given the tools as a real model is (it ignores them)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> OfflineModel:
        return self


def _agent(run: reversi.Run, *calls: tuple[str, dict[str, Any]]) -> Any:
    turns = [AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(calls)]),
             AIMessage("all done")]
    middleware = JournalMiddleware(run, names={"create_charge": "stripe.create_charge"})
    return create_agent(OfflineModel(messages=iter(turns)), tools=[create_charge, send_email], middleware=[middleware])


def test_every_tool_call_is_journaled_and_rolled_back(tmp_path: Path) -> None:
    charged.clear()
    (tmp_path / "tools.yaml").write_text("version: 1\ntools:\n  stripe.create_charge:\n    compensation:\n"
                                         "      tool: stripe.refund\n      args: {charge: \"$result.id\"}\n"
                                         "  send_email: {irreversible: true}\n")
    with reversi.open(f"sqlite:///{tmp_path}/r.db", manifests=[str(tmp_path / "tools.yaml")]) as ledger:
        run = ledger.start_run(run_id="run_thread-1")
        agent = _agent(run, ("create_charge", {"amount": 700, "order_id": "o-1"}), ("send_email", {"to": "a@b.c"}))
        messages = agent.invoke({"messages": [{"role": "user", "content": "charge o-1, then mail"}]})["messages"]
        answers = [m for m in messages if isinstance(m, ToolMessage)]
        assert [a.status for a in answers] == ["success", "error"] and charged == [700]
        steps = sorted(run.steps(), key=lambda s: s.call_id or "")  # the tool node runs the two calls at once
        assert [(s.tool, s.status.value, s.call_id) for s in steps] == [
            ("stripe.create_charge", "succeeded", "c0"), ("send_email", "failed", "c1")]
        assert "smtp refused the recipient" in (steps[1].error or "")
        assert steps[0].result == {"id": "ch_o-1", "amount": 700}  # the tool's dict, not the tool node's text of it
        report = run.rollback(lambda call: {"refunded": call["args"]["charge"]})
        assert report.compensated == [steps[0].index]


def test_a_refusal_reaches_the_model_and_calls_nothing(tmp_path: Path) -> None:
    charged.clear()
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        ledger.add_halt("card processor incident", tool="stripe.*")
        run = ledger.start_run()
        messages = _agent(run, ("create_charge", {"amount": 5, "order_id": "o-2"})).invoke(
            {"messages": [{"role": "user", "content": "charge"}]})["messages"]
        (answer,) = [m for m in messages if isinstance(m, ToolMessage)]
        assert answer.status == "error" and "kill switch: card processor incident" in str(answer.content)
        assert charged == [] and run.steps() == ()
