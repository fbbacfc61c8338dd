"""Between MCP results and the journal, and the one place errors become MCP answers.

Refusals and every other Reversi error reach an agent or an operator as a tool error
(`isError: true` with the reason as text) so a model can read it; an upstream's JSON-RPC error is
raised again unchanged (same code, message and data).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from mcp import types

from reversi.core.answers import TextAnswer
from reversi.core.json_values import JSONObjectView, LooseJSON, parse_json
from reversi.errors import BadInput, ReversiError


def result_value(raw: Mapping[str, LooseJSON]) -> LooseJSON:
    """`$result` of a call: structuredContent when present, else the first text content parsed as JSON,
    else that text (None when there is no text at all)."""
    if raw.get("structuredContent") is not None:
        return raw["structuredContent"]
    text = first_text(raw)
    if text is None:
        return None
    try:
        return parse_json(text, "the result")
    except BadInput:  # not JSON, or nested past what the journal keeps: the text itself
        return text


def journaled_answer(raw: Mapping[str, LooseJSON]) -> TextAnswer | LooseJSON:
    """`$result` as the journal keeps it: `result_value`, with the text as it came beside it
    (`TextAnswer`, for `$result_text`) when that text was read as JSON."""
    value = result_value(raw)
    text = first_text(raw) if raw.get("structuredContent") is None else None
    return TextAnswer(value, text) if text is not None and not isinstance(value, str) else value


def first_text(raw: Mapping[str, LooseJSON]) -> str | None:
    for block in raw.get("content") or ():
        if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
            return str(block["text"])
    return None


def is_error(raw: JSONObjectView) -> bool:
    return bool(raw.get("isError"))


def error_text(raw: Mapping[str, LooseJSON]) -> str:
    """What a tool error said, for the journal."""
    text = first_text(raw)
    if text is not None:
        return text
    if raw.get("structuredContent") is not None:
        return json.dumps(raw["structuredContent"], ensure_ascii=False)
    return "the tool reported an error"


def tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def from_error(exc: ReversiError) -> types.CallToolResult:
    """A Reversi error (a refusal, a bad argument, an unknown run, ...) as the tool error an agent sees."""
    result = tool_error(exc.message)
    result.meta = {"reversi/error": exc.code}
    return result


def structured(value: Mapping[str, object], text: str | None = None) -> types.CallToolResult:
    """An operator tool's answer, a JSON object (a TypedDict's too): as structured content, and as text for
    clients that show only text."""
    data = dict(value)
    return types.CallToolResult(
        content=[types.TextContent(text=text if text is not None else json.dumps(data, indent=2, ensure_ascii=False))],
        structured_content=data,
    )
