"""References in manifest templates: whole references, paths, `[*]`, interpolation, `$$`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reversi.core.json_values import JSONObjectView, JSONView
from reversi.core.references import (
    MissingReference,
    ReferenceContext,
    RunContext,
    bad_references,
    resolve,
    result_references,
)

RUN = RunContext(id="run_abc", actor="ana", tenant="acme", environment="prod")


def ctx(args: Any = None, result: Any = None, step: int = 3) -> ReferenceContext:
    return ReferenceContext(args={} if args is None else args, result=result, run=RUN, step=step)


def test_a_whole_reference_is_replaced_by_the_value_it_names_of_any_type() -> None:
    c = ctx(args={"amount": 500, "tags": ["a"], "meta": {"k": None}}, result={"id": "ch_1", "ok": True})
    assert resolve("$args.amount", c) == 500
    assert resolve("$args.tags", c) == ["a"]
    assert resolve("$args.meta", c) == {"k": None}
    assert resolve("$result.id", c) == "ch_1"
    assert resolve("$result.ok", c) is True


def test_bare_args_and_result_name_the_whole_value() -> None:
    c = ctx(args={"a": 1}, result=[1, 2])
    assert resolve("$args", c) == {"a": 1}
    assert resolve("$result", c) == [1, 2]


def test_run_fields_and_step_are_references() -> None:
    c = ctx(step=7)
    assert resolve(["$run.id", "$run.actor", "$run.tenant", "$run.environment", "$step"], c) == [
        "run_abc",
        "ana",
        "acme",
        "prod",
        7,
    ]


def test_indexes_and_nested_keys_make_a_path() -> None:
    c = ctx(result={"items": [{"id": "a"}, {"id": "b", "tags": ["x", "y"]}]})
    assert resolve("$result.items[1].id", c) == "b"
    assert resolve("$result.items[1].tags[0]", c) == "x"


def test_a_star_maps_the_rest_of_the_path_over_a_list() -> None:
    c = ctx(result={"entities": [{"name": "Ann", "obs": [1]}, {"name": "Bo", "obs": [2, 3]}]})
    assert resolve("$result.entities[*].name", c) == ["Ann", "Bo"]
    assert resolve("$result.entities[*].obs[0]", c) == [1, 2]
    assert resolve("$result.entities[*].obs[*]", c) == [[1], [2, 3]]
    assert resolve("$result.entities[*]", c) == c.result["entities"]


def test_a_star_over_an_empty_list_yields_an_empty_list() -> None:
    assert resolve("$result.entities[*].name", ctx(result={"entities": []})) == []


@pytest.mark.parametrize(
    ("template", "result"),
    [
        ("$result.id", {"other": 1}),
        ("$result.items[2]", {"items": [1, 2]}),
        ("$result.items[0]", {"items": {"0": 1}}),
        ("$result.id.x", {"id": "ch_1"}),
        ("$result.entities[*].name", {"entities": [{"name": "a"}, {}]}),
        ("$result.entities[*].name", {"entities": "nope"}),
        ("$result.id", None),
        ("$result", None),
    ],
)
def test_a_path_that_names_nothing_is_a_missing_reference_named_as_written(template: str, result: Any) -> None:
    with pytest.raises(MissingReference) as caught:
        resolve(template, ctx(result=result))
    assert caught.value.ref == template
    assert template in str(caught.value)


def test_a_missing_reference_inside_text_is_named_in_its_dollar_form() -> None:
    with pytest.raises(MissingReference) as caught:
        resolve("refund ${args.missing} now", ctx(args={}))
    assert caught.value.ref == "$args.missing"


def test_a_null_value_that_exists_is_not_missing() -> None:
    assert resolve("$args.x", ctx(args={"x": None})) is None


def test_text_with_parts_is_interpolated_rendering_non_text_as_compact_json() -> None:
    c = ctx(args={"name": "Zoë", "n": 2, "tags": ["a", "b"], "meta": {"k": True}}, result={"id": "x"}, step=4)
    assert resolve("hi ${args.name}, #${args.n}", c) == "hi Zoë, #2"
    assert resolve("${args.tags}|${args.meta}", c) == '["a","b"]|{"k":true}'
    assert resolve("${run.id}/${step}/${result.id}", c) == "run_abc/4/x"


def test_double_dollar_is_a_literal_dollar_at_the_start_and_inside_text() -> None:
    c = ctx(args={"n": 5})
    assert resolve("$$args.n", c) == "$args.n"
    assert resolve("costs $$${args.n}", c) == "costs $5"
    assert resolve("$${args.n}", c) == "${args.n}"
    assert resolve("$$", c) == "$"


def test_a_lone_dollar_inside_text_is_kept() -> None:
    assert resolve("5$ each", ctx()) == "5$ each"


def test_dict_keys_are_not_resolved_only_values() -> None:
    assert resolve({"$args.x": "$args.x"}, ctx(args={"x": 1})) == {"$args.x": 1}


def test_non_string_scalars_pass_through() -> None:
    assert resolve([1, 2.5, True, None], ctx()) == [1, 2.5, True, None]


@pytest.mark.parametrize(
    "bad",
    [
        "$reslt.id",
        "$",
        "$args.",
        "$args..x",
        "$args.x[",
        "$args.x[a]",
        "$run",
        "$run.name",
        "$step.x",
        "$result.id and more",
        "$ args.x",
    ],
)
def test_any_other_string_beginning_with_a_dollar_is_a_bad_reference(bad: str) -> None:
    assert bad_references(bad) == [bad]
    with pytest.raises(ValueError, match="bad reference"):
        resolve(bad, ctx())


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("id ${reslt.id}", ["${reslt.id}"]),
        ("x ${} y", ["${}"]),
        ("unclosed ${args.x", ["${args.x"]),
        ("${run} and ${args.ok} and ${nope}", ["${run}", "${nope}"]),
    ],
)
def test_any_other_interpolated_part_is_a_bad_reference(text: str, bad: list[str]) -> None:
    assert bad_references(text) == bad


def test_bad_references_walks_lists_and_mapping_values_but_not_keys() -> None:
    template: JSONObjectView = {"$key": ["$ok", {"x": "$result.id", "y": "$reslt"}], "z": "fine"}
    assert bad_references(template) == ["$ok", "$reslt"]


def test_good_references_are_not_bad() -> None:
    good: list[JSONView] = ["$args.a.b[0][*].c", "$result", "$run.environment", "$step", "a ${args.x} b", "$$x",
                            "plain", 5]
    assert bad_references(good) == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="ab$ {}"),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text("ab", max_size=2), children),
    max_leaves=10,
)


@given(json_values)
def test_a_template_with_no_dollar_resolves_to_itself(value: Any) -> None:
    if "$" not in json.dumps(value):
        assert resolve(value, ctx()) == value


@given(st.text(alphabet="abc.[]*${}$0 ", max_size=12))
def test_a_string_either_resolves_or_is_reported_bad_never_both(text: str) -> None:
    c = ctx(args={"a": {"b": 1}}, result={"a": [1]})
    bad = bad_references(text)
    try:
        resolve(text, c)
    except MissingReference:
        assert not bad
    except ValueError:
        assert bad
    else:
        assert not bad


@given(st.text(alphabet="abc $", max_size=10))
def test_escaping_every_dollar_gives_the_text_back(text: str) -> None:
    assert resolve(text.replace("$", "$$"), ctx()) == text


def test_the_result_references_of_a_template_are_listed_once_each_with_their_paths() -> None:
    template = {"a": "$result.id", "b": ["${result.items[0].sku}-x", "$args.n", "$result.id"], "c": "$result[*]"}
    assert result_references(template) == [("$result.id", ("id",)), ("$result.items[0].sku", ("items", 0, "sku")),
                                           ("$result[*]", (None,))]
    assert result_references({"x": "$args.id", "y": "$nonsense"}) == []
