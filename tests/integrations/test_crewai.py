"""A CrewAI crew, driven by a scripted offline `BaseLLM` (native function calling), calls journaled
tools; the run rolls back; a refusal reaches the model as the tool's `ToolFailure`; a tool error is
journaled `failed`; the current span's trace is journaled; async tools stay async."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import BaseTool, tool
from opentelemetry import trace
from pydantic import Field
from tests.integrations import billing
from tests.integrations.conftest import refund
from tests.integrations.test_capture import MANIFEST, _undo_of, get_price, prices, set_price
from tests.otel_spans import in_memory_spans

import reversi
from reversi.errors import BadInput
from reversi.integrations.crewai import journaled

charged = billing.charged
NAMES = {"create_charge": "stripe.create_charge"}


@tool
def create_charge(amount: int, order_id: str) -> dict[str, Any]:
    """Charge a customer."""
    return asyncio.run(billing.create_charge(amount, order_id))


@tool
def send_email(to: str) -> str:
    """Email a customer."""
    raise RuntimeError("smtp refused the recipient")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """CrewAI sends telemetry and asks about tracing unless told not to: nothing leaves the machine."""
    monkeypatch.setenv("CREWAI_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("CREWAI_TRACING_ENABLED", "false")
    charged.clear()


class ScriptedLLM(BaseLLM):
    """Calls each tool of `script` in turn (native function calling), then answers with what the tools
    said; keeps what each request showed it of the tools' answers."""

    script: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)
    seen: list[str] = Field(default_factory=list)

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> Any:
        answers = [str(m["content"]) for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
        self.seen = answers
        if len(answers) < len(self.script):
            name, args = self.script[len(answers)]
            return [{"id": f"c{len(answers)}", "type": "function",
                     "function": {"name": name, "arguments": json.dumps(args)}}]
        return " | ".join(answers) or "nothing to do"

    def supports_function_calling(self) -> bool:
        return True


def crew_of(run: reversi.Run, llm: BaseLLM, tools: list[Any] | None = None) -> Crew:
    agent = Agent(role="billing", goal="charge orders", backstory="a careful clerk", llm=llm, max_iter=5,
                  tools=journaled(tools or [create_charge, send_email], run, names=NAMES))
    task = Task(description="charge order o-1", expected_output="what the tools said", agent=agent)
    return Crew(agents=[agent], tasks=[task])


def scripted(*calls: tuple[str, dict[str, Any]]) -> ScriptedLLM:
    return ScriptedLLM(model="scripted", script=list(calls))


def test_an_agents_tool_calls_are_journaled_and_rolled_back(sqlite_ledger: reversi.Ledger) -> None:
    run = sqlite_ledger.start_run(run_id="run_session-7", actor="billing-agent")
    llm = scripted(("create_charge", {"amount": 700, "order_id": "o-1"}), ("send_email", {"to": "a@b.c"}))
    output = crew_of(run, llm).kickoff()
    assert charged == [700] and "ch_o-1" in str(output)
    steps = sqlite_ledger.continue_run("run_session-7").steps()
    assert [(s.tool, s.args, s.status.value) for s in steps] == [
        ("stripe.create_charge", {"amount": 700, "order_id": "o-1"}, "succeeded"),
        ("send_email", {"to": "a@b.c"}, "failed"),
    ]
    assert steps[0].result == {"id": "ch_o-1", "amount": 700}
    assert steps[1].error == "smtp refused the recipient" and "smtp refused the recipient" in llm.seen[1]
    report = run.rollback(compensate=refund)
    assert report.compensated == [0], report.to_text()


def test_a_halt_refuses_the_tool_and_the_model_reads_why(sqlite_ledger: reversi.Ledger) -> None:
    sqlite_ledger.add_halt("card processor incident", tool="stripe.*")
    run = sqlite_ledger.start_run(actor="billing-agent")
    llm = scripted(("create_charge", {"amount": 700, "order_id": "o-1"}))
    crew = crew_of(run, llm)
    crew.kickoff()
    assert charged == [] and run.steps() == () and run.events()[-1].type == "refused"
    assert "Reversi refused this call, nothing was done" in llm.seen[0]  # its next request
    assert "card processor incident" in llm.seen[0]
    [failure] = crew.tasks[0].output.tool_failures if crew.tasks[0].output else []
    assert failure.failure.code == "halted"  # CrewAI knows the call failed


def test_a_tool_that_reports_a_failure_is_journaled_failed(sqlite_ledger: reversi.Ledger) -> None:
    from crewai.tools.tool_failure import ToolFailure

    @tool
    def post_message(channel: str) -> Any:
        """Post to a channel."""
        return ToolFailure(message="channel not found", code="channel_not_found")

    run = sqlite_ledger.start_run(actor="billing-agent")
    llm = scripted(("post_message", {"channel": "#ops"}))
    crew_of(run, llm, [post_message]).kickoff()
    [step] = run.steps()
    assert (step.tool, step.status.value) == ("post_message", "failed")
    assert step.error == "channel not found (code: channel_not_found)"
    assert "channel not found" in llm.seen[0]


def test_the_trace_of_the_current_span_is_journaled(sqlite_ledger: reversi.Ledger) -> None:
    spans = in_memory_spans()
    run = sqlite_ledger.start_run(actor="billing-agent")
    crew = crew_of(run, scripted(("create_charge", {"amount": 700, "order_id": "o-1"})))
    with trace.get_tracer("test").start_as_current_span("agent session") as session:
        crew.kickoff()
    call = next(s for s in spans.get_finished_spans() if s.name == "reversi.call stripe.create_charge")
    assert call.context is not None and call.context.trace_id == session.get_span_context().trace_id
    intended = next(e for e in run.events() if e.type == "intended")
    assert intended.data["trace_id"] == format(session.get_span_context().trace_id, "032x")


def test_two_crews_journal_concurrently_in_one_ledger(ledger: reversi.Ledger) -> None:
    runs = [ledger.start_run(run_id=f"run_crew-{n}", actor=f"crew-{n}") for n in range(2)]
    crews = [crew_of(run, scripted(*[("create_charge", {"amount": 100 + n, "order_id": f"o-{n}"})] * 2),
                     [create_charge]) for n, run in enumerate(runs)]
    threads = [threading.Thread(target=crew.kickoff) for crew in crews]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(charged) == [100, 100, 101, 101]
    for n, run in enumerate(runs):
        steps = ledger.continue_run(run.id).steps()
        assert [(s.args["amount"], s.status.value) for s in steps] == [(100 + n, "succeeded")] * 2
        assert run.rollback(compensate=refund).compensated == [1, 0]


def test_an_async_tool_is_journaled_through_acall(sqlite_ledger: reversi.Ledger) -> None:
    class Refund(BaseTool):
        name: str = "refund"
        description: str = "Refund a charge."

        def _run(self, charge_id: str) -> str:
            raise AssertionError("the async path must not run the sync one")

        async def _arun(self, charge_id: str) -> str:
            return f"refunded {charge_id}"

    run = sqlite_ledger.start_run(actor="billing-agent")
    (wrapped,) = journaled([Refund()], run)
    assert asyncio.run(wrapped.arun(charge_id="ch_1")) == "refunded ch_1"
    (sync,) = journaled([create_charge], run)
    assert asyncio.run(sync.arun(amount=5, order_id="o-9")) == {"id": "ch_o-9", "amount": 5}  # in a thread
    assert [(s.tool, s.status.value) for s in run.steps()] == [("refund", "succeeded"), ("create_charge", "succeeded")]


def test_the_wrapped_tool_keeps_what_the_agent_sees_and_plain_functions_are_made_tools(tmp_path: Path) -> None:
    def restock(sku: str, count: int) -> str:
        """Put items back in stock."""
        return f"{count} x {sku}"

    with reversi.open(f"sqlite:///{tmp_path}/r.db") as opened:
        run = opened.start_run()
        wrapped, made = journaled([create_charge, restock], run)
        assert (wrapped.name, wrapped.description, wrapped.args_schema) == (
            create_charge.name, create_charge.description, create_charge.args_schema)
        assert made.name == "restock" and made.run(sku="lamp", count=2) == "2 x lamp"
        assert [s.args for s in run.steps()] == [{"sku": "lamp", "count": 2}]


def test_bad_inputs_are_refused_in_one_line(tmp_path: Path) -> None:
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as opened:
        run = opened.start_run()
        with pytest.raises(BadInput, match=r"^journaled: int 42 is neither a CrewAI tool nor a function$"):
            journaled([42], run)  # type: ignore[list-item]
        with pytest.raises(BadInput, match=r"^journaled: str 'not a tool' is neither a CrewAI tool nor a function$"):
            journaled(["not a tool"], run)  # type: ignore[list-item]
        assert [e.type for e in run.events()] == ["run_opened"]


def test_a_capture_is_read_before_the_call_for_the_undo(tmp_path: Path) -> None:
    prices["lamp"] = 30
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    with reversi.open(f"sqlite:///{tmp_path}/r.db", manifests=[str(tmp_path / "tools.yaml")]) as opened:
        run = opened.start_run()
        agent = Agent(role="shop", goal="set prices", backstory="a clerk", max_iter=5,
                      llm=scripted(("set_price", {"sku": "lamp", "price": 45})),
                      tools=journaled([set_price], run, capture=get_price))
        Crew(agents=[agent], tasks=[Task(description="raise the lamp's price", expected_output="done",
                                         agent=agent)]).kickoff()
        assert prices == {"lamp": 45} and _undo_of(run) == {"sku": "lamp", "price": 30}


def test_the_inventory_agent_is_rolled_back_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         db_url: str) -> None:
    from tests.integrations.inventory import CALLS, Shop
    from tests.integrations.inventory import NAMES as INVENTORY

    shop = Shop.make(tmp_path, monkeypatch)
    before = shop.state()
    with shop.open(db_url) as ledger:
        run = ledger.start_run(actor="inventory-agent")
        tools = journaled([shop.write_file, shop.update_stock, shop.email_supplier], run, names=INVENTORY)
        agent = Agent(role="stock keeper", goal="keep stock right", backstory="careful", llm=scripted(*CALLS),
                      max_iter=6, tools=tools)
        Crew(agents=[agent], tasks=[Task(description="lamps are out", expected_output="done", agent=agent)]).kickoff()
        shop.check_rolled_back(run, before)
