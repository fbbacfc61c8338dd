"""An OpenAI Agents SDK agent, driven by a scripted offline `Model`, calls journaled function tools;
the run rolls back; a refused call reaches the model as the tool's output."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage, function_tool, set_trace_processors
from agents.tracing import Span, Trace, TracingProcessor
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from tests.integrations import billing

import reversi
from reversi.integrations.openai_agents import journaled

charged = billing.charged
NAMES = {"create_charge": "stripe.create_charge"}


create_charge = function_tool(billing.create_charge)


@function_tool
def send_email(to: str) -> str:
    """Email a customer."""
    raise RuntimeError("smtp refused the recipient")


class ScriptedModel(Model):
    """Calls each tool of `script` in turn, then answers with what the tools said."""

    def __init__(self, script: list[tuple[str, dict[str, Any]]]) -> None:
        self.script = script
        self.seen: list[str] = []

    async def get_response(self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
                           ) -> ModelResponse:
        self.seen = [str(i["output"]) for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if len(self.seen) < len(self.script):
            name, arguments = self.script[len(self.seen)]
            call = ResponseFunctionToolCall(type="function_call", call_id=f"c{len(self.seen)}", name=name,
                                            arguments=json.dumps(arguments), id=f"fc{len(self.seen)}",
                                            status="completed")
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text=" | ".join(self.seen), annotations=[])
        message = ResponseOutputMessage(type="message", id="m1", role="assistant", status="completed", content=[text])
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise AssertionError("these tests run the agent with Runner.run, which never streams")


def run_agent(run: reversi.Run, model: ScriptedModel) -> str:
    agent = Agent(name="billing", model=model, tools=journaled([create_charge, send_email], run, names=NAMES))
    result = asyncio.run(Runner.run(agent, "charge order o-1", run_config=RunConfig(tracing_disabled=True)))
    return str(result.final_output)


def test_an_agents_tool_calls_are_journaled_and_rolled_back(sqlite_ledger: reversi.Ledger) -> None:
    charged.clear()
    run = sqlite_ledger.start_run(run_id="run_session-7", actor="billing-agent")
    model = ScriptedModel([("create_charge", {"amount": 700, "order_id": "o-1"}), ("send_email", {"to": "a@b.c"})])
    output = run_agent(run, model)
    assert charged == [700] and "ch_o-1" in output
    steps = sqlite_ledger.continue_run("run_session-7").steps()
    assert [(s.tool, s.args, s.status.value) for s in steps] == [
        ("stripe.create_charge", {"amount": 700, "order_id": "o-1"}, "succeeded"),
        ("send_email", {"to": "a@b.c"}, "failed"),
    ]
    assert steps[1].error == "smtp refused the recipient" and "An error occurred" in model.seen[1]  # its own policy
    report = run.rollback(compensate=lambda call: {"refund": call["args"]})
    assert report.compensated == [0], report.to_text()


def test_a_halt_refuses_the_tool_and_the_model_reads_why(sqlite_ledger: reversi.Ledger) -> None:
    charged.clear()
    sqlite_ledger.add_halt("card processor incident", tool="stripe.*")
    run = sqlite_ledger.start_run(actor="billing-agent")
    model = ScriptedModel([("create_charge", {"amount": 700, "order_id": "o-1"})])
    output = run_agent(run, model)
    assert charged == [] and run.steps() == ()
    assert "card processor incident" in model.seen[0] and "nothing was done" in output


class Recorded(TracingProcessor):
    """The SDK's own traces and function spans, kept here instead of exported (nothing leaves the machine)."""

    def __init__(self) -> None:
        self.traces: list[str] = []
        self.spans: list[tuple[str, str]] = []

    def on_trace_start(self, trace: Trace) -> None:
        self.traces.append(trace.trace_id)

    def on_trace_end(self, trace: Trace) -> None:
        pass

    def on_span_start(self, span: Span[Any]) -> None:
        if span.span_data.type == "function":
            self.spans.append((span.trace_id, span.span_id))

    def on_span_end(self, span: Span[Any]) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


def test_the_sdks_own_trace_and_the_models_call_id_are_journaled(sqlite_ledger: reversi.Ledger) -> None:
    charged.clear()
    recorded = Recorded()
    set_trace_processors([recorded])
    try:
        run = sqlite_ledger.start_run(actor="billing-agent")
        agent = Agent(name="billing", model=ScriptedModel([("create_charge", {"amount": 5, "order_id": "o-9"})]),
                      tools=journaled([create_charge], run, names=NAMES))
        asyncio.run(Runner.run(agent, "charge o-9"))
    finally:
        set_trace_processors([])
    (trace_id,) = recorded.traces
    (span,) = recorded.spans
    (step,) = run.steps()
    intended = next(e for e in run.events() if e.type == "intended")
    assert step.call_id == "c0" and trace_id.startswith("trace_")
    assert (intended.data["trace_id"], intended.data["span_id"]) == span and span[0] == trace_id
    assert tracing_off_journals_nothing(sqlite_ledger)


def tracing_off_journals_nothing(ledger: reversi.Ledger) -> bool:
    run = ledger.start_run()
    run_agent(run, ScriptedModel([("create_charge", {"amount": 5, "order_id": "o-10"})]))  # tracing_disabled
    intended = next(e for e in run.events() if e.type == "intended")
    return "trace_id" not in intended.data


def test_only_ids_shaped_as_ids_are_journaled() -> None:
    from reversi.engine import tracing

    for trace_id, span_id, expected in [("trace_0123456789abcdef", "span_0123456789ab", 2),
                                        ("no-op", "span_x1234567", 0), ("trace_" + "a" * 65, None, 0),
                                        ("trace_abc\n12345", None, 0), ("trace_0123456789abcdef", "<script>", 1),
                                        (7, None, 0)]:
        with tracing.framework_trace(trace_id, span_id):
            assert len(tracing.journal_fields()) == expected, (trace_id, span_id)


def test_a_tool_that_needs_the_sdks_approval_is_journaled_once_when_approved_and_not_when_rejected(
    sqlite_ledger: reversi.Ledger,
) -> None:
    """The SDK's own human-in-the-loop (`needs_approval`): the run stops with an interruption before the tool
    is called, so nothing is journaled while it waits; approved and resumed, the call is journaled once,
    with the model's call id; rejected, it never runs and nothing is journaled."""
    charged.clear()
    guarded = function_tool(billing.create_charge, needs_approval=True)

    async def converse(run: reversi.Run, approve: bool) -> None:
        agent = Agent(name="billing", model=ScriptedModel([("create_charge", {"amount": 9, "order_id": "o-5"})]),
                      tools=journaled([guarded], run, names=NAMES))
        already = list(charged)
        first = await Runner.run(agent, "charge o-5", run_config=RunConfig(tracing_disabled=True))
        (waiting,) = first.interruptions
        assert run.steps() == () and charged == already  # asked, not called: nothing to journal yet
        state = first.to_state()
        (state.approve if approve else state.reject)(waiting)
        await Runner.run(agent, state, run_config=RunConfig(tracing_disabled=True))

    approved, rejected = sqlite_ledger.start_run(), sqlite_ledger.start_run()
    asyncio.run(converse(approved, True))
    assert [(s.tool, s.status.value, s.call_id) for s in approved.steps()] == [
        ("stripe.create_charge", "succeeded", "c0")]
    assert charged == [9]
    asyncio.run(converse(rejected, False))
    assert rejected.steps() == () and charged == [9]
