"""An OpenAI Agents SDK agent, driven by a scripted offline `Model`, calls journaled function tools;
the run rolls back; a refused call reaches the model as the tool's output."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage, function_tool
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
