"""Matching a read-back answer against `expect`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reversi.core.expect import first_mismatch


def test_an_answer_with_every_expected_key_matches_and_extra_keys_are_fine() -> None:
    assert first_mismatch({"status": "canceled"}, {"status": "canceled", "id": "pi_1"}) is None


def test_an_empty_expect_matches_any_object() -> None:
    assert first_mismatch({}, {"x": 1}) is None


def test_a_different_value_is_reported_as_json() -> None:
    assert first_mismatch({"status": "canceled"}, {"status": "succeeded"}) == (
        '`status` is "succeeded", expected "canceled"'
    )


def test_a_missing_key_is_reported() -> None:
    assert first_mismatch({"status": "canceled"}, {}) == '`status` is missing, expected "canceled"'


def test_nested_keys_are_matched_recursively_and_named_with_dots() -> None:
    expect = {"charge": {"refund": {"status": "done"}}}
    assert first_mismatch(expect, {"charge": {"refund": {"status": "done", "x": 1}, "y": 2}}) is None
    assert first_mismatch(expect, {"charge": {"refund": {"status": "open"}}}) == (
        '`charge.refund.status` is "open", expected "done"'
    )
    assert first_mismatch(expect, {"charge": {}}) == '`charge.refund` is missing, expected {"status":"done"}'


def test_an_answer_that_is_not_an_object_is_reported() -> None:
    assert first_mismatch({"status": "x"}, 7) == "the answer is 7, expected an object"
    assert first_mismatch({"status": "x"}, None) == "the answer is null, expected an object"
    assert first_mismatch({"charge": {"status": "x"}}, {"charge": [1]}) == ("`charge` is [1], expected an object")


def test_the_first_mismatch_follows_expects_key_order() -> None:
    expect = {"b": 1, "a": 1}
    assert first_mismatch(expect, {"a": 2, "b": 2}) == "`b` is 2, expected 1"


@pytest.mark.parametrize(
    ("expected", "found", "matches"),
    [
        (1, 1.0, True),
        (True, 1, False),
        (1, True, False),
        (False, 0, False),
        (None, None, True),
        (None, 0, False),
        ("1", 1, False),
        ([1, 2], [1, 2], True),
        ([1, 2], [2, 1], False),
        ([1], [1, 2], False),
        ([True], [1], False),
        ([{"a": 1}], [{"a": 1, "b": 2}], False),
    ],
)
def test_lists_and_scalars_compare_by_equality_with_booleans_apart(expected: Any, found: Any, matches: bool) -> None:
    assert (first_mismatch({"v": expected}, {"v": found}) is None) is matches


def test_values_are_rendered_as_compact_json_without_ascii_escapes() -> None:
    assert first_mismatch({"name": "Zoë"}, {"name": ["a", {"b": True}]}) == (
        '`name` is ["a",{"b":true}], expected "Zoë"'
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=2), children, max_size=3),
    max_leaves=8,
)


# A key that begins with `$` is an operator in `expect` (`$lt`, `$gt`, ...), not a key to match.
keys = st.text(max_size=3).filter(lambda key: not key.startswith("$"))


@given(st.dictionaries(keys, json_values, max_size=4))
def test_every_object_matches_itself(value: dict[str, Any]) -> None:
    assert first_mismatch(value, value) is None


@given(
    st.dictionaries(keys, json_values, max_size=4),
    st.dictionaries(keys, json_values, max_size=4),
)
def test_an_answer_with_extra_keys_still_matches(expect: dict[str, Any], extra: dict[str, Any]) -> None:
    assert first_mismatch(expect, {**extra, **expect}) is None
