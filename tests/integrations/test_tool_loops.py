"""Raw tool-use loops on the model APIs' own types (issue 29): an OpenAI Responses response, a Chat
Completions message and an Anthropic Messages reply, built with the pinned SDKs offline; each tool
call journaled with the model's call id, each answer valid under the SDK's own input type, refusals
and failures said to the model (Anthropic's `is_error`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import Message, TextBlock, ToolResultBlockParam, ToolUseBlock, Usage
from openai.types.chat import ChatCompletionMessage, ChatCompletionToolMessageParam
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
    Function,
)
from openai.types.responses import Response, ResponseFunctionToolCall
from openai.types.responses.response_input_param import FunctionCallOutput
from pydantic import TypeAdapter

import reversi
from reversi.errors import BadInput
from reversi.integrations.tool_loops import anthropic_tool_results, chat_tool_messages, responses_outputs

charged: list[int] = []


def create_charge(amount: int, order_id: str) -> dict[str, Any]:
    charged.append(amount)
    return {"id": f"ch_{order_id}", "amount": amount}


def send_email(to: str) -> str:
    raise RuntimeError("smtp refused the recipient")


TOOLS: dict[str, Callable[..., Any]] = {"create_charge": create_charge, "send_email": send_email}
NAMES = {"create_charge": "stripe.create_charge"}


@pytest.fixture
def run(tmp_path: Path) -> Any:
    charged.clear()
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        yield ledger.start_run(actor="loop-agent")


def test_openai_responses(run: reversi.Run) -> None:
    response = Response.model_construct(output=[
        ResponseFunctionToolCall(type="function_call", call_id="c1", name="create_charge",
                                 arguments='{"amount": 700, "order_id": "o-1"}', id="fc1", status="completed"),
        ResponseFunctionToolCall(type="function_call", call_id="c2", name="send_email", arguments='{"to": "a@b.c"}',
                                 id="fc2", status="completed"),
        ResponseFunctionToolCall(type="function_call", call_id="c3", name="drop_db", arguments="{}", id="fc3",
                                 status="completed"),
    ])
    outputs = responses_outputs(run, response, TOOLS, names=NAMES)
    for item in outputs:
        TypeAdapter(FunctionCallOutput).validate_python(item)
    assert [o["call_id"] for o in outputs] == ["c1", "c2", "c3"]
    assert outputs[0]["output"] == '{"id": "ch_o-1", "amount": 700}'
    assert outputs[1]["output"] == "the tool failed: smtp refused the recipient"
    assert outputs[2]["output"] == 'no tool named "drop_db" was offered'
    assert [(s.tool, s.status.value, s.call_id) for s in run.steps()] == [
        ("stripe.create_charge", "succeeded", "c1"), ("send_email", "failed", "c2")]


def test_openai_chat_completions(run: reversi.Run) -> None:
    message = ChatCompletionMessage(role="assistant", content=None, tool_calls=[
        ChatCompletionMessageFunctionToolCall(id="call_1", type="function", function=Function(
            name="create_charge", arguments='{"amount": 900, "order_id": "o-2"}')),
        ChatCompletionMessageFunctionToolCall(id="call_2", type="function", function=Function(
            name="create_charge", arguments="[1, 2]")),
    ])
    replies = chat_tool_messages(run, message, TOOLS, names=NAMES)
    for reply in replies:
        TypeAdapter(ChatCompletionToolMessageParam).validate_python(reply)
    assert replies == [
        {"role": "tool", "tool_call_id": "call_1", "content": '{"id": "ch_o-2", "amount": 900}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "the arguments are not a JSON object"},
    ]
    assert charged == [900] and len(run.steps()) == 1


def test_anthropic_messages_with_a_halt(run: reversi.Run, tmp_path: Path) -> None:
    reply = Message(id="msg_1", type="message", role="assistant", model="offline", stop_reason="tool_use",
                    stop_sequence=None, usage=Usage(input_tokens=1, output_tokens=1), content=[
                        TextBlock(type="text", text="Charging, then mailing."),
                        ToolUseBlock(type="tool_use", id="toolu_1", name="create_charge",
                                     input={"amount": 500, "order_id": "o-3"}),
                        ToolUseBlock(type="tool_use", id="toolu_2", name="send_email", input={"to": "a@b.c"}),
                    ])
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        ledger.add_halt("card processor incident", tool="stripe.*")
    results = anthropic_tool_results(run, reply, TOOLS, names=NAMES)
    for block in results:
        TypeAdapter(ToolResultBlockParam).validate_python(block)
    assert results[0] == {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True, "content": (
        "Reversi refused this call, nothing was done: kill switch: card processor incident (halt "
        f"{results[0]['content'].split('(halt ')[1].split(' ')[0]} stops only calls with tool=stripe.*)")}
    assert results[1]["is_error"] is True and results[1]["content"].endswith("smtp refused the recipient")
    assert charged == [] and [e.type for e in run.events()].count("refused") == 1


def test_an_async_tool_function_is_a_mistake_said_at_once(run: reversi.Run) -> None:
    async def lookup(q: str) -> str:
        return q

    call = {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": "x"}}
    with pytest.raises(BadInput, match=r"lookup is an async function: in an async loop, call it with run\.acall"):
        anthropic_tool_results(run, {"content": [call]}, {"lookup": lookup})
    assert run.steps() == ()


def test_a_capture_is_made_before_the_call(tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text("version: 1\ntools:\n  set_price:\n"
                                         "    capture: {tool: get_price, args: {sku: \"$args.sku\"}}\n"
                                         "    compensation: {tool: set_price, args: {sku: \"$args.sku\", "
                                         "price: \"$before.price\"}}\n")
    prices = {"lamp": 30}

    def set_price(sku: str, price: int) -> str:
        prices[sku] = price
        return "ok"

    with reversi.open(f"sqlite:///{tmp_path}/p.db", manifests=[str(tmp_path / "tools.yaml")]) as ledger:
        run = ledger.start_run()
        call = {"type": "tool_use", "id": "t1", "name": "set_price", "input": {"sku": "lamp", "price": 45}}
        anthropic_tool_results(run, {"content": [call]}, {"set_price": set_price},
                               capture=lambda tool, args: {"price": prices[args["sku"]]})
        (action,) = run.plan().actions
    assert action.compensation is not None and action.compensation.args == {"sku": "lamp", "price": 30}
