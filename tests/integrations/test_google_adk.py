"""A Google ADK agent, driven by a scripted offline `BaseLlm`, with `JournalPlugin` on its runner: every
tool call journaled through ADK's own tool callbacks; the run rolls back; a refusal reaches the model as
the tool's error answer; a tool error is journaled `failed`; the trace of ADK's tool span is journaled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.tools.function_tool import FunctionTool
from google.genai import types
from pydantic import Field
from tests.integrations import billing
from tests.integrations.conftest import refund
from tests.integrations.test_capture import MANIFEST, _undo_of, get_price, prices, set_price
from tests.otel_spans import in_memory_spans

import reversi
from reversi.errors import BadInput
from reversi.integrations.google_adk import JournalPlugin

charged = billing.charged
NAMES = {"create_charge": "stripe.create_charge"}


def send_email(to: str) -> str:
    """Email a customer."""
    raise RuntimeError("smtp refused the recipient")


class ScriptedLlm(BaseLlm):
    """Calls each tool of `script` in turn, then answers with what the tools said; keeps what each
    request showed it of the tools' answers."""

    script: list[tuple[str, dict[str, Any]]]
    seen: list[str] = Field(default_factory=list)

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False
                                     ) -> AsyncGenerator[LlmResponse, None]:
        answers = [p.function_response for c in llm_request.contents for p in c.parts or [] if p.function_response]
        self.seen = [str(a.response) for a in answers]
        if len(answers) < len(self.script):
            name, args = self.script[len(answers)]
            call = types.FunctionCall(id=f"c{len(answers)}", name=name, args=args)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
            return
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=" | ".join(self.seen))]))


def runner_of(run: reversi.Run, agent: LlmAgent) -> InMemoryRunner:
    return InMemoryRunner(app=App(name="billing", root_agent=agent, plugins=[JournalPlugin(run, names=NAMES)]))


async def turn(runner: InMemoryRunner, session_id: str, *parts: types.Part) -> list[Event]:
    """One user turn: the events the agent made of it."""
    message = types.Content(role="user", parts=list(parts))
    return [e async for e in runner.run_async(user_id="u1", session_id=session_id, new_message=message)]


async def run_agent(run: reversi.Run, model: ScriptedLlm, tools: list[Any] | None = None) -> str:
    runner = runner_of(run, LlmAgent(name="billing", model=model, tools=tools or [billing.create_charge, send_email]))
    session = await runner.session_service.create_session(app_name="billing", user_id="u1")
    events = await turn(runner, session.id, types.Part(text="charge o-1"))
    return " ".join(p.text for e in events if e.content for p in e.content.parts or [] if p.text)


def charge_and_mail() -> ScriptedLlm:
    return ScriptedLlm(model="scripted", script=[("create_charge", {"amount": 700, "order_id": "o-1"}),
                                                 ("send_email", {"to": "a@b.c"})])


def test_an_agents_tool_calls_are_journaled_and_rolled_back(sqlite_ledger: reversi.Ledger) -> None:
    charged.clear()
    run = sqlite_ledger.start_run(run_id="run_session-7", actor="billing-agent")
    model = charge_and_mail()
    with pytest.raises(RuntimeError, match="smtp refused the recipient"):  # ADK raises a tool's error
        asyncio.run(run_agent(run, model))
    assert charged == [700]
    steps = sqlite_ledger.continue_run("run_session-7").steps()
    assert [(s.tool, s.args, s.status.value, s.call_id) for s in steps] == [
        ("stripe.create_charge", {"amount": 700, "order_id": "o-1"}, "succeeded", "c0"),
        ("send_email", {"to": "a@b.c"}, "failed", "c1"),
    ]
    assert steps[0].result == {"id": "ch_o-1", "amount": 700} and steps[1].error == "smtp refused the recipient"
    report = run.rollback(compensate=refund)
    assert report.compensated == [0], report.to_text()


def test_a_tool_error_the_agent_answers_itself_is_journaled_failed(sqlite_ledger: reversi.Ledger) -> None:
    def mail_back(tool: Any, args: dict[str, Any], tool_context: Any, error: Exception) -> dict[str, Any]:
        return {"error": f"not sent: {error}"}

    run = sqlite_ledger.start_run(actor="billing-agent")
    model = ScriptedLlm(model="scripted", script=[("send_email", {"to": "a@b.c"})])
    runner = runner_of(run, LlmAgent(name="billing", model=model, tools=[send_email], on_tool_error_callback=mail_back))

    async def go() -> None:
        session = await runner.session_service.create_session(app_name="billing", user_id="u1")
        await turn(runner, session.id, types.Part(text="mail"))

    asyncio.run(go())
    [step] = run.steps()
    assert (step.tool, step.status.value, step.error) == ("send_email", "failed", "smtp refused the recipient")
    assert "not sent: smtp refused the recipient" in model.seen[0]


def test_a_halt_refuses_the_tool_and_the_model_reads_why(sqlite_ledger: reversi.Ledger) -> None:
    charged.clear()
    sqlite_ledger.add_halt("card processor incident", tool="stripe.*")
    run = sqlite_ledger.start_run(actor="billing-agent")
    model = ScriptedLlm(model="scripted", script=[("create_charge", {"amount": 700, "order_id": "o-1"})])
    output = asyncio.run(run_agent(run, model))
    assert charged == [] and run.steps() == () and run.events()[-1].type == "refused"
    assert "card processor incident" in model.seen[0] and "nothing was done" in model.seen[0]  # its next request
    assert "Reversi refused this call" in output


def test_the_call_span_sits_under_adks_tool_span_and_its_trace_is_journaled(sqlite_ledger: reversi.Ledger) -> None:
    spans = in_memory_spans()
    run = sqlite_ledger.start_run(actor="billing-agent")
    model = ScriptedLlm(model="scripted", script=[("create_charge", {"amount": 700, "order_id": "o-1"})])
    asyncio.run(run_agent(run, model))
    by_name = {s.name: s for s in spans.get_finished_spans()}
    call, tool_span = by_name["reversi.call stripe.create_charge"], by_name["execute_tool create_charge"]
    assert call.parent is not None and tool_span.context is not None and call.context is not None
    assert call.parent.span_id == tool_span.context.span_id
    intended = next(e for e in run.events() if e.type == "intended")
    assert intended.data["trace_id"] == format(call.context.trace_id, "032x")


def test_two_agents_journal_concurrently_in_one_ledger(ledger: reversi.Ledger) -> None:
    charged.clear()
    runs = [ledger.start_run(run_id=f"run_agent-{n}", actor=f"agent-{n}") for n in range(2)]
    models = [ScriptedLlm(model="scripted", script=[("create_charge", {"amount": 100 + n, "order_id": f"o-{n}"})] * 2)
              for n in range(2)]

    async def both() -> None:
        agents = zip(runs, models, strict=True)
        await asyncio.gather(*(run_agent(run, model, [billing.create_charge]) for run, model in agents))

    asyncio.run(both())
    assert sorted(charged) == [100, 100, 101, 101]
    for n, run in enumerate(runs):
        steps = ledger.continue_run(run.id).steps()
        assert [(s.args["amount"], s.status.value, s.call_id) for s in steps] == [
            (100 + n, "succeeded", "c0"), (100 + n, "succeeded", "c1")]
        assert run.rollback(compensate=refund).compensated == [1, 0]


async def held_then_answered(run: reversi.Run, confirmed: bool) -> tuple[list[str], str]:
    """The agent asks to charge with a tool that needs confirmation; the step's status while it waits,
    then the user's answer, and the model's last word."""
    model = ScriptedLlm(model="scripted", script=[("create_charge", {"amount": 700, "order_id": "o-1"})])
    held = FunctionTool(billing.create_charge, require_confirmation=True)
    runner = runner_of(run, LlmAgent(name="billing", model=model, tools=[held]))
    session = await runner.session_service.create_session(app_name="billing", user_id="u1")
    events = await turn(runner, session.id, types.Part(text="charge o-1"))
    asked = next(c for e in events for c in e.get_function_calls() if c.name == "adk_request_confirmation")
    statuses = [s.status.value for s in await asyncio.to_thread(run.steps)]
    answer = types.FunctionResponse(id=asked.id, name=asked.name, response={"confirmed": confirmed})
    await turn(runner, session.id, types.Part(function_response=answer))
    return statuses, model.seen[-1]


def test_a_call_held_for_confirmation_stays_open_and_the_confirmed_call_continues_it(
    sqlite_ledger: reversi.Ledger,
) -> None:
    charged.clear()
    run = sqlite_ledger.start_run(actor="billing-agent")
    statuses, said = asyncio.run(held_then_answered(run, confirmed=True))
    assert statuses == ["intended"]  # waiting: the plan says unresolved, not "never took effect"
    [step] = run.steps()
    assert (step.tool, step.status.value, step.call_id, charged) == ("stripe.create_charge", "succeeded", "c0", [700])
    assert "ch_o-1" in said


def test_a_call_rejected_when_asked_to_confirm_is_journaled_failed(sqlite_ledger: reversi.Ledger) -> None:
    charged.clear()
    run = sqlite_ledger.start_run(actor="billing-agent")
    asyncio.run(held_then_answered(run, confirmed=False))
    [step] = run.steps()
    assert (step.status.value, step.error, charged) == ("failed", "the call was rejected when asked to confirm it", [])
    assert run.plan().actions[0].kind.value != "unresolved"


def test_bad_inputs_are_refused_in_one_line(tmp_path: Path) -> None:
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as opened:
        run = opened.start_run()
        odd: Any = "run_1"
        with pytest.raises(BadInput, match=r"^JournalPlugin: give the run to journal the agent's calls in, not str"):
            JournalPlugin(odd)
        with pytest.raises(BadInput, match=r"^JournalPlugin: names maps tool names to journaled names, not"):
            JournalPlugin(run, names=odd)
        with pytest.raises(BadInput, match=r"^JournalPlugin: capture is a reader, capture\(tool, arguments\), not"):
            JournalPlugin(run, capture=odd)
        assert [e.type for e in run.events()] == ["run_opened"]


def test_a_capture_is_read_before_the_call_for_the_undo(tmp_path: Path) -> None:
    prices["lamp"] = 30
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    with reversi.open(f"sqlite:///{tmp_path}/r.db", manifests=[str(tmp_path / "tools.yaml")]) as opened:
        run = opened.start_run()
        model = ScriptedLlm(model="scripted", script=[("set_price", {"sku": "lamp", "price": 45})])
        agent = LlmAgent(name="shop", model=model, tools=[set_price])
        runner = InMemoryRunner(app=App(name="shop", root_agent=agent, plugins=[JournalPlugin(run, capture=get_price)]))

        async def go() -> None:
            session = await runner.session_service.create_session(app_name="shop", user_id="u1")
            await turn(runner, session.id, types.Part(text="raise the lamp's price"))

        asyncio.run(go())
        assert prices == {"lamp": 45} and _undo_of(run) == {"sku": "lamp", "price": 30}
