"""Undos an upstream declares in its tool listing (SEP-3172 `recovery`, `x-compensation-pair`): how each
is read into references, what is refused (a hostile server chooses every byte of it), how a step's
journaled declaration is planned, and that a manifest the operator wrote always wins."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reversi.core.manifest import ManifestSet
from reversi.core.manifest_draft import draft_manifest
from reversi.core.manifest_fit import fit_problems
from reversi.core.manifest_yaml import parse_manifest
from reversi.core.models import Event, Mode, RunRecord, RunSnapshot, Scope, StepRecord, derive_step
from reversi.core.planner import plan_rollback
from reversi.core.references import NOTHING, ReferenceContext, RunContext, is_reference, resolve
from reversi.core.server_undo import DeclaredUndo, declared_undos, recovery_annotation
from reversi.core.tool_listing import parse_listing

RUN = RunContext("run_x", "ann", "acme", "prod")


def _tool(name: str, annotations: Any = None, required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {p: {"type": "string"} for p in required or []}}
    if required is not None:
        schema["required"] = required
    return {"name": name, "inputSchema": schema} | ({"annotations": annotations} if annotations is not None else {})


def _recovery(operation: str, **parameters: Any) -> dict[str, Any]:
    return {"recovery": {"strategy": "compensation",
                         "compensatingOperation": {"operationId": operation, "parameters": parameters}}}


def _read(*tools: dict[str, Any], prefix: str = "") -> tuple[dict[str, DeclaredUndo], list[str]]:
    return declared_undos(list(tools), server="shop", named=lambda t: prefix + t, approve=False)


def test_recovery_parameters_become_references_to_the_result_and_arguments() -> None:
    undos, warnings = _read(
        _tool("charge", _recovery("refund", transactionId="$response.body#/transactionId",
                                  first="$response.body#/items/0/id", whole="$response.body",
                                  customer="$request.body#/customer", reason="requested_by_customer",
                                  price="5 $ ${x}")),
        _tool("refund"), prefix="shop.")
    assert warnings == []
    undo = undos["shop.charge"]
    assert (undo.tool, undo.convention, undo.source) == ("shop.refund", "recovery", "server shop (recovery)")
    assert undo.args == {"transactionId": "$result.transactionId", "first": "$result.items[0].id",
                         "whole": "$result", "customer": "$args.customer", "reason": "requested_by_customer",
                         "price": "5 $$ $${x}"}
    ctx = ReferenceContext({"customer": "c_1"}, {"transactionId": "T-1", "items": [{"id": 7}]}, RUN, 0)
    assert resolve(dict(undo.args), ctx) == {
        "transactionId": "T-1", "first": 7, "whole": {"transactionId": "T-1", "items": [{"id": 7}]},
        "customer": "c_1", "reason": "requested_by_customer", "price": "5 $ ${x}"}


def test_a_json_pointers_escapes_are_read() -> None:
    undos, _ = _read(_tool("a", _recovery("b", x="$response.body#/a~1b/c~0d")), _tool("b"))
    assert undos["a"].args == {"x": "$result.a/b.c~d"}
    assert resolve("$result.a/b.c~d", ReferenceContext({}, {"a/b": {"c~d": 1}}, RUN, 0)) == 1


def test_the_pair_gives_each_required_parameter_the_result_field_else_the_argument_of_its_name() -> None:
    undos, warnings = _read(_tool("add_item", {"x-compensation-pair": "delete_item"}),
                            _tool("delete_item", required=["item_id", "folder"]))
    assert warnings == []
    undo = undos["add_item"]
    assert undo.convention == "x-compensation-pair"
    assert resolve(dict(undo.args), ReferenceContext({"folder": "f", "item_id": "arg"}, {"item_id": "i-1"}, RUN,
                                                       0)) == {"item_id": "i-1", "folder": "f"}


def test_recovery_is_read_before_the_pair() -> None:
    annotations = _recovery("refund", id="$response.body#/id") | {"x-compensation-pair": "void"}
    undos, _ = _read(_tool("charge", annotations), _tool("refund"), _tool("void", required=["id"]))
    assert undos["charge"].tool == "refund"


HOSTILE: list[tuple[Any, str]] = [
    ({"recovery": "refund"}, 'expected {strategy: "compensation"'),
    ({"recovery": {"strategy": "retry-elsewhere"}}, 'expected {strategy: "compensation"'),
    ({"recovery": {"strategy": "compensation"}}, "compensatingOperation: expected an object"),
    (_recovery("elsewhere"), '"elsewhere" is not a tool the server lists'),
    (_recovery("../other.refund"), "is not a tool the server lists"),
    ({"recovery": {"strategy": "compensation", "compensatingOperation": {"operationId": 3}}},
     "expected the name of a tool"),
    (_recovery("refund", id="$url"), '"$url" is not an expression an MCP call can answer'),
    (_recovery("refund", id="$response.header.Location"), "is not an expression"),
    (_recovery("refund", id="$response.body#id"), "is not a JSON pointer"),
    (_recovery("refund", id="$response.body#/a.b"), 'the key "a.b" cannot be named'),
    (_recovery("refund", id="$response.body#/${run.id}"), "cannot be named"),
    (_recovery("refund", id=5), "expected a runtime expression"),
    (_recovery("refund", **{"$each": "$response.body#/ids"}), "may not begin with $"),
    ({"recovery": {"strategy": "compensation", "compensatingOperation": {
        "operationId": "refund", "parameters": {f"p{i}": "x" for i in range(65)}}}}, "at most 64"),
    (_recovery("refund", id="$response.body#/items/01"), '"01" is no index'),
    (_recovery("refund", **{f"p{i}": "x" * 200 for i in range(60)}), "longer than 8192 characters"),
    ({"x-compensation-pair": ""}, "expected the name of a tool"),
    ({"x-compensation-pair": ["refund"]}, "expected the name of a tool"),
    ({"x-compensation-pair": "delete"}, 'the undo tool\'s parameter "a.b" cannot be given by name'),
]


@pytest.mark.parametrize(("annotations", "said"), HOSTILE)
def test_a_declaration_that_cannot_be_used_is_warned_of_and_gives_no_undo(annotations: Any, said: str) -> None:
    undos, warnings = _read(_tool("charge", annotations), _tool("refund"), _tool("delete", required=["a.b"]))
    assert undos == {}
    assert len(warnings) == 1 and said in warnings[0], warnings
    assert warnings[0].startswith('upstream shop: the undo "charge" declares is not used: ')


def test_listings_of_the_wrong_shape_are_skipped() -> None:
    undos, warnings = declared_undos([None, 3, {"name": 5}, {"name": "a", "annotations": "x"}, {"name": "b"}],
                                     server="s", named=str, approve=True)
    assert (undos, warnings) == ({}, [])


@given(st.lists(st.text(max_size=8), max_size=4))
def test_any_pointer_reads_as_a_reference_to_the_same_place_or_is_refused(tokens: list[str]) -> None:
    pointer = "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)
    undos, warnings = _read(_tool("a", _recovery("b", x=f"$response.body#{pointer}")), _tool("b"))
    if warnings:
        assert undos == {}
        return
    template = undos["a"].args["x"]
    assert isinstance(template, str) and is_reference(template)
    value: Any = "found"
    for token in reversed(tokens):
        value = [value] * (int(token) + 1) if token.isascii() and token.isdigit() else {token: value}
    assert resolve(template, ReferenceContext({}, value, RUN, 0, before=NOTHING)) == "found"


# -- publishing: what `reversi-connectors serve` lists ------------------------------------------------

SHIPPED = """
version: 1
tools:
  charge:
    compensation: {tool: refund, args: {result: "$result", step: "$step", id: "$result.data[0].id", why: dup}}
  tagged:
    compensation: {tool: untag, args: {name: "${args.name}-x"}}
  chosen:
    compensation:
      - {tool: refund, when: {"$args.a": 1}}
      - {tool: untag}
"""


def test_a_plain_undo_is_published_as_recovery_and_reads_back_the_same() -> None:
    entries = {e.pattern: e for e in parse_manifest(SHIPPED, "m.yaml")[0]}
    published = recovery_annotation(entries["charge"], required={"result"})
    assert published == {"strategy": "compensation", "compensatingOperation": {"operationId": "refund", "parameters": {
        "result": "$response.body", "id": "$response.body#/data/0/id", "why": "dup"}}}
    undos, _ = _read(_tool("charge", {"recovery": published}), _tool("refund"))
    assert undos["charge"].args == {"result": "$result", "id": "$result.data[0].id", "why": "dup"}
    # what the proposal cannot say: text built from parts (required), `$step` (required), alternatives
    assert recovery_annotation(entries["tagged"], required={"name"}) is None
    assert recovery_annotation(entries["charge"], required={"result", "step"}) is None
    assert recovery_annotation(entries["chosen"], required=()) is None


# -- planning a step from its journaled declaration ---------------------------------------------------


def _snapshot(*steps: tuple[str, dict[str, Any], Any]) -> RunSnapshot:
    run = RunRecord("run_x", "p", Mode.OBSERVE, Scope("ann", "acme", "prod"), {}, "2026-01-01T00:00:00Z")
    states = []
    for index, (tool, result, declared) in enumerate(steps):
        intended = {"tool": tool, "args": {"customer": "c_1"}} | ({"declared_undo": declared} if declared else {})
        events = [Event("run_x", 2 * index, index, "intended", "t", "ann", intended),
                  Event("run_x", 2 * index + 1, index, "succeeded", "t", "ann", {"result": result})]
        states.append(derive_step(StepRecord("run_x", index, tool, {"customer": "c_1"}), events))
    return RunSnapshot(run, tuple(states))


def test_a_step_is_planned_from_the_undo_journaled_with_it_and_a_written_manifest_wins() -> None:
    undos, _ = _read(_tool("charge", _recovery("refund", id="$response.body#/id")), _tool("refund"))
    declared = undos["charge"].journal()
    assert DeclaredUndo.from_journal(declared) == undos["charge"]
    snapshot = _snapshot(("charge", {"id": "ch_1"}, declared), ("charge", {"other": 1}, declared),
                         ("charge", {"id": "ch_3"}, None))
    plan = plan_rollback(snapshot, ManifestSet.empty())
    actions = {a.step: a for a in plan.actions}
    assert actions[0].compensation is not None and actions[0].compensation.args == {"id": "ch_1"}
    assert actions[0].to_dict()["declared_by"] == "server shop (recovery)"
    assert actions[0].describe() == "compensate -> refund  (undo declared by server shop (recovery))"
    # the proposal: an expression that names nothing makes no partial call
    assert actions[1].kind.value == "unrecoverable" and "$result.id" in str(actions[1].reason)
    assert actions[2].kind.value == "unmanifested"  # journaled before the server declared it: nothing to go on
    written = ManifestSet(parse_manifest("version: 1\ntools:\n  charge: {irreversible: the money is gone}\n",
                                         "ops.yaml")[0])
    assert {a.kind.value for a in plan_rollback(snapshot, written).actions} == {"unrecoverable"}


def test_the_operators_approval_choice_is_journaled_and_planned() -> None:
    undos, _ = declared_undos([_tool("charge", _recovery("refund")), _tool("refund")], server="shop", named=str,
                              approve=True)
    plan = plan_rollback(_snapshot(("charge", {"id": 1}, undos["charge"].journal())), ManifestSet.empty())
    assert plan.actions[0].compensation is not None and plan.actions[0].compensation.needs_approval is True


@pytest.mark.parametrize("journaled", [
    "x", {"server": "s"}, {"server": "s", "convention": "other", "tool": "t", "args": {}, "approve": False},
    {"server": "s", "convention": "recovery", "tool": "t", "args": [], "approve": False},
    {"server": "s", "convention": "recovery", "tool": "t", "args": {}, "approve": "no"},
])
def test_a_journaled_declaration_of_another_shape_is_none(journaled: Any) -> None:
    assert DeclaredUndo.from_journal(journaled) is None


def test_declared_entries_sit_below_every_written_one() -> None:
    written = ManifestSet(parse_manifest("version: 1\ntools:\n  'shop.*': {effect: read}\n", "ops.yaml")[0])
    undos, _ = _read(_tool("charge", _recovery("refund")), _tool("refund"), prefix="shop.")
    other, _ = declared_undos([_tool("charge", _recovery("refund")), _tool("refund")], server="mail",
                              named=lambda t: f"mail.{t}", approve=False)
    written.declare({name: u.entry(name) for name, u in (undos | other).items()})
    assert written.lookup("shop.charge") is written.written("shop.charge")  # the glob the operator wrote
    entry = written.lookup("mail.charge")
    assert entry is not None and entry.declaration is not None and written.written("mail.charge") is None
    written.declare({})
    assert written.lookup("mail.charge") is None


def test_a_draft_writes_the_declared_undo_as_the_operators_own_entry() -> None:
    listing = parse_listing({"tools": [
        _tool("charge", _recovery("refund", id="$response.body#/id", why="dup")), _tool("refund", required=["id"]),
        _tool("add_item", {"x-compensation-pair": "delete_item"}), _tool("delete_item", required=["item_id"]),
        _tool("send", _recovery("nowhere"))]}, "listing.json", server="shop")
    text = draft_manifest(listing)
    assert "# REVIEW: the undo the server declares (recovery)" in text
    assert '# REVIEW: upstream shop: the undo "send" declares is not used: recovery.compensatingOperation.' \
           'operationId: "nowhere" is not a tool the server lists' in text
    entries, problems = parse_manifest(text, "draft.yaml")
    assert [p for p in problems if not p.warning] == []
    by_name = {e.pattern: e for e in entries}
    assert by_name["charge"].compensations[0].args == {"id": "$result.id", "why": "dup"}
    assert by_name["add_item"].compensations[0].args == {
        "item_id": {"$optional": "$result.item_id", "default": "$args.item_id"}}
    assert by_name["charge"].declaration is None  # written by the operator now, not declared


def test_the_check_against_a_server_says_which_uncovered_tools_it_declares_an_undo_for() -> None:
    listing = parse_listing({"tools": [_tool("charge", _recovery("refund")), _tool("refund"), _tool("send")]},
                            "listing.json", server="shop")
    written = ManifestSet(parse_manifest("version: 1\ntools:\n  refund: {irreversible: an undo tool}\n",
                                         "ops.yaml")[0])
    said = [p.message for p in fit_problems(written, listing, missing_at=("ops.yaml", 2))]
    assert said == ["charge may write (the server does not mark it read-only) and has no entry (its server declares "
                    "an undo, refund by recovery, which a gateway uses when told to take this server's undos)",
                    "send may write (the server does not mark it read-only) and has no entry"]
