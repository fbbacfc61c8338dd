"""Raw tool-use loops: a model's tool calls made through a run, answered in the shape its API wants.

For an agent written straight on a model API, without a framework. Give the model's response and
your tool functions; each tool call is journaled in `run` (the model's call id kept with it), and
you get back what to send the model next:

    # OpenAI Responses
    response = client.responses.create(model=..., input=messages, tools=specs)
    messages += response.output + responses_outputs(run, response, {"create_charge": create_charge})

    # OpenAI Chat Completions
    message = client.chat.completions.create(model=..., messages=messages, tools=specs).choices[0].message
    messages += [message, *chat_tool_messages(run, message, tools)]

    # Anthropic Messages
    reply = client.messages.create(model=..., messages=messages, tools=specs, max_tokens=...)
    messages += [{"role": "assistant", "content": reply.content},
                 {"role": "user", "content": anthropic_tool_results(run, reply, tools)}]

A refusal (a halt, a duplicate, an approval to wait for) calls nothing, and the model reads why; a
tool that raises is journaled `failed` and the model reads its error (Anthropic's `is_error: true`).
A call of a tool you did not give, or with arguments that are not a JSON object, is answered as an
error and journals nothing. `capture=read` makes the reads manifest entries declare, as `run.call`.
The SDK objects are read by their documented fields, and plain dicts of the same shape work too:
this module imports neither SDK.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reversi.core.json_values import JSONObject, LooseJSON, LooseJSONObject, to_json
from reversi.engine.rollback import ReadBack
from reversi.engine.run import Run
from reversi.errors import BadInput, Refused
from reversi.integrations._journal import journaled_name, plain_arguments, refusal_text, usable_call_id

__all__ = ["anthropic_tool_results", "chat_tool_messages", "responses_outputs"]

Tools = Mapping[str, Callable[..., Any]]


def responses_outputs(run: Run, response: Any, tools: Tools, *, names: Mapping[str, str] | None = None,
                      capture: ReadBack | None = None) -> list[LooseJSONObject]:
    """A `function_call_output` item for each `function_call` of an OpenAI Responses API response."""
    return [
        {"type": "function_call_output", "call_id": _field(item, "call_id"),
         "output": _answer(_Call(run, tools, names, capture), _field(item, "name"), _field(item, "arguments"),
                           _field(item, "call_id"))[0]}
        for item in _field(response, "output") or () if _field(item, "type") == "function_call"
    ]


def chat_tool_messages(run: Run, message: Any, tools: Tools, *, names: Mapping[str, str] | None = None,
                       capture: ReadBack | None = None) -> list[LooseJSONObject]:
    """A `tool` message for each function tool call of an OpenAI Chat Completions assistant message."""
    found: list[LooseJSONObject] = []
    for call in _field(message, "tool_calls") or ():
        function = _field(call, "function")
        text, _ = _answer(_Call(run, tools, names, capture), _field(function, "name"), _field(function, "arguments"),
                          _field(call, "id"))
        found.append({"role": "tool", "tool_call_id": _field(call, "id"), "content": text})
    return found


def anthropic_tool_results(run: Run, message: Any, tools: Tools, *, names: Mapping[str, str] | None = None,
                           capture: ReadBack | None = None) -> list[LooseJSONObject]:
    """A `tool_result` block for each `tool_use` block of an Anthropic Messages API reply, `is_error`
    set for a refusal or a failure (send them as the next user message's content)."""
    found: list[LooseJSONObject] = []
    for block in _field(message, "content") or ():
        if _field(block, "type") != "tool_use":
            continue
        text, failed = _answer(_Call(run, tools, names, capture), _field(block, "name"), _field(block, "input"),
                               _field(block, "id"))
        found.append({"type": "tool_result", "tool_use_id": _field(block, "id"), "content": text}
                     | ({"is_error": True} if failed else {}))
    return found


@dataclass(frozen=True)
class _Call:
    """What every call of one response is made with."""

    run: Run
    tools: Tools
    names: Mapping[str, str] | None
    capture: ReadBack | None


def _answer(how: _Call, name: LooseJSON, arguments: LooseJSON, call_id: object) -> tuple[str, bool]:
    """The text the model reads for one call, and whether it is an error; the call journaled in the run."""
    fn = how.tools.get(name) if isinstance(name, str) else None
    if fn is None:
        return f"no tool named {json.dumps(name)} was offered", True
    if inspect.iscoroutinefunction(fn):
        raise BadInput(f"{name} is an async function: in an async loop, call it with run.acall")
    args = _arguments(arguments)
    if args is None:
        return "the arguments are not a JSON object", True
    try:
        result = how.run.call(journaled_name(how.names or {}, name), args, fn, call_id=usable_call_id(call_id),
                              capture=how.capture)
    except Refused as exc:
        return refusal_text(exc.message), True
    except Exception as exc:  # journaled `failed` (or `uncertain`) already: the model reads why
        return f"the tool failed: {str(exc) or type(exc).__name__}", True
    return (result if isinstance(result, str) else json.dumps(to_json(result), ensure_ascii=False)), False


def _arguments(arguments: LooseJSON) -> JSONObject | None:
    """The call's arguments: a JSON object, as text (OpenAI) or already parsed (Anthropic)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return None
    return plain_arguments(arguments) if isinstance(arguments, Mapping) else None


def _field(value: Any, name: str) -> Any:
    """A field of an SDK object or of a dict of the same shape."""
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)
