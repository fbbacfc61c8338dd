"""`$result` of an MCP call: what a compensation's `$result.X` reads from an upstream's answer."""

from __future__ import annotations

from reversi.gateway.results import result_value


def test_structured_content_is_the_result_before_any_text() -> None:
    raw = {"structuredContent": {"id": "ch_1"}, "content": [{"type": "text", "text": "[1]"}]}
    assert result_value(raw) == {"id": "ch_1"}


def test_text_is_parsed_as_json_and_kept_as_text_when_it_is_not() -> None:
    assert result_value({"content": [{"type": "text", "text": '{"id": "r_1"}'}]}) == {"id": "r_1"}
    assert result_value({"content": [{"type": "text", "text": "created r_1"}]}) == "created r_1"
    assert result_value({"content": []}) is None


def test_text_nested_deeper_than_the_journal_keeps_is_the_text_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit as well as the depth limit
    assert result_value({"content": [{"type": "text", "text": deep}]}) == deep
    shallow_enough = "[" * 150 + "]" * 150
    assert result_value({"content": [{"type": "text", "text": shallow_enough}]}) != shallow_enough
