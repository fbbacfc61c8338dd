"""Whether manifests fit a server's tools (`reversi.core.manifest_fit` over `reversi.core.tool_listing`):
each kind of problem, with the line it is written on, from a listing shaped as servers send them."""

from __future__ import annotations

from typing import Any

import pytest

from reversi.core.manifest import merge
from reversi.core.manifest_fit import fit_problems, key_lines
from reversi.core.manifest_yaml import parse_manifest
from reversi.core.tool_listing import Fit, parse_listing, path_fit
from reversi.errors import BadInput

ENTITY = {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array",
                                                                              "items": {"type": "string"}}},
          "required": ["name"], "additionalProperties": False}
LISTING: dict[str, Any] = {"tools": [
    {"name": "create_item",
     "inputSchema": {"type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/e"}},
                                                      "dryRun": {"type": "boolean"}},
                     "required": ["items"], "$defs": {"e": ENTITY}},
     "outputSchema": {"type": "object", "properties": {"created": {"type": "array", "items": ENTITY}},
                      "additionalProperties": False},
     "annotations": {"readOnlyHint": False}},
    {"name": "delete_item",
     "inputSchema": {"type": "object", "properties": {"names": {"type": "array"}, "force": {"type": "boolean"}},
                     "required": ["names"], "additionalProperties": False},
     "annotations": {"readOnlyHint": False, "destructiveHint": True}},
    {"name": "get_item", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
     "annotations": {"readOnlyHint": True}},
    {"name": "touch_item", "inputSchema": {"type": "object"}},
    {"name": "rename_item", "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}}},
     "annotations": {"readOnlyHint": False}},
], "_meta": {"reversi/server": {"name": "items", "version": "1.2"}}}


def check(text: str, listing: dict[str, Any] = LISTING, **options: Any) -> list[str]:
    entries, problems = parse_manifest(text, "m.yaml")
    assert [str(p) for p in problems if not p.warning] == []
    manifests, _ = merge([entries])
    found = fit_problems(manifests, parse_listing(listing, "listing.json"), lines={"m.yaml": key_lines(text)},
                         missing_at=("m.yaml", 2), **options)
    return [str(p) for p in found]


GOOD = """\
version: 1
tools:
  create_item:
    compensation:
      tool: delete_item
      args: {names: "$result.created[*].name", force: true}
    verification:
      tool: get_item
      args:
        name: "$args.items[0].name"
      expect: {tags: "$args.items[0].tags"}
  delete_item: {irreversible: true}
  get_*: {effect: read}
  touch_item: {idempotent: true}
  rename_item: {effect: read}
"""


def test_a_manifest_that_fits_has_no_problem_but_an_entry_read_the_server_says_writes() -> None:
    assert check(GOOD) == [
        "m.yaml:15: warning: rename_item is declared effect: read, but the server says it is not read-only "
        "(readOnlyHint: false)"
    ]


def test_each_kind_of_misfit_is_reported_at_the_line_it_is_written_on() -> None:
    text = """\
version: 1
tools:
  create_item:
    compensation:
      tool: delete_item
      args:
        force: "$args.dry_run"
        nope: 1
    verification:
      tool: get_items
      args: {name: "$result.created[0].title"}
  delete_item:
    compensation:
      tool: undelete_item
  get_item: {effect: read}
  rename_item:
    verification:
      tool: delete_item
      args: {names: ["x"]}
      expect: {ok: "$result.ok", n: "$args.to.length"}
  gone_item: {irreversible: true}
"""
    assert check(text) == [
        "m.yaml:2: touch_item may write (the server does not mark it read-only) and has no entry",
        'm.yaml:6: compensation.args: delete_item requires "names", which is not given',
        'm.yaml:7: $args.dry_run: not in the input schema of create_item (no key "dry_run" declared)',
        'm.yaml:8: compensation.args.nope: delete_item has no argument "nope" (its input schema allows no others)',
        "m.yaml:10: verification tool get_items: the server offers no such tool",
        'm.yaml:11: $result.created[0].title cannot resolve under the output schema of create_item '
        '(no key "title" in created[0])',
        "m.yaml:14: compensation tool undelete_item: the server offers no such tool",
        "m.yaml:18: warning: verification tool delete_item is not read-only (readOnlyHint: false): a read-back "
        "should change nothing",
        "m.yaml:20: $args.to.length: not in the input schema of rename_item (to is a string, not an object)",
        "m.yaml:21: warning: the server offers no tool gone_item",
    ]


def test_an_idempotent_entry_for_a_tool_the_server_calls_destructive_is_a_warning() -> None:
    text = "version: 1\ntools:\n  delete_item: {idempotent: true}\n  create_item: {irreversible: true}\n" \
           "  rename_item: {irreversible: true}\n  touch_item: {irreversible: true}\n  get_item: {effect: read}\n"
    assert check(text) == [
        "m.yaml:3: warning: delete_item is declared idempotent: true, so a rollback skips it, but the server says "
        "it may destroy data (destructiveHint: true)",
    ]


def test_an_undeclared_key_of_an_open_schema_is_a_warning_and_a_closed_one_an_error() -> None:
    open_schema = {"tools": [{"name": "a", "inputSchema": {"type": "object", "properties": {"x": {}},
                                                           "required": ["x"]}},
                             {"name": "b", "inputSchema": {"type": "object", "properties": {"y": {}}}}]}
    text = 'version: 1\ntools:\n  a:\n    compensation: {tool: b, args: {y: 1, z: "$args.x"}}\n' \
           '  b: {irreversible: true}\n'
    assert check(text, open_schema) == [
        'm.yaml:4: warning: compensation.args.z: b has no argument "z" declared: it may be ignored']


def test_tools_of_a_server_not_at_hand_are_not_said_to_be_missing() -> None:
    text = "version: 1\ntools:\n  create_item:\n    compensation: {tool: other.undo, args: {}}\n" \
           "  delete_item: {irreversible: true}\n  get_item: {effect: read}\n  touch_item: {idempotent: true}\n" \
           "  rename_item: {irreversible: true}\n"
    assert check(text, judged=lambda name: not name.startswith("other.")) == []
    assert check(text) == ["m.yaml:4: compensation tool other.undo: the server offers no such tool"]


@pytest.mark.parametrize(("path", "fit"), [
    (("items", 0, "name"), Fit.FITS),
    (("items", None, "tags", 3), Fit.FITS),
    (("items", None, "title"), Fit.IMPOSSIBLE),
    (("items", "name"), Fit.IMPOSSIBLE),
    (("dryRun", 0), Fit.IMPOSSIBLE),
    (("other",), Fit.UNDECLARED),
])
def test_a_path_fits_a_schema_through_refs_lists_and_closed_objects(path: tuple[Any, ...], fit: Fit) -> None:
    schema = LISTING["tools"][0]["inputSchema"]
    assert path_fit(schema, path)[0] is fit


def test_a_path_fits_when_one_branch_of_an_any_of_allows_it() -> None:
    schema = {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"id": {}},
                                             "additionalProperties": False}]}
    assert path_fit(schema, ("id",)) == (Fit.FITS, "")
    assert path_fit(schema, ("name",))[0] is Fit.IMPOSSIBLE
    assert path_fit({"$ref": "#/nowhere"}, ("x",)) == (Fit.FITS, "")
    assert path_fit({"$ref": "#"}, ("x", "y")) == (Fit.FITS, "")  # a reference to itself ends


def test_a_listing_says_its_server_and_refuses_what_is_not_a_tools_list_result() -> None:
    listing = parse_listing({"jsonrpc": "2.0", "id": 1, "result": LISTING}, "x.json")
    assert (listing.server, listing.version, listing.describe()) == ("items", "1.2", "items 1.2 (5 tools)")
    assert [t.name for t in listing.tools if t.writes] == ["create_item", "delete_item", "touch_item", "rename_item"]
    for bad, message in (([], 'x.json: expected a tools/list result, {"tools": [...]}'),
                         ({"tools": [{"title": "no name"}]}, "x.json: tools[0]: expected a tool with a name"),
                         ({"tools": [{"name": "a", "inputSchema": []}]},
                          "x.json: tools[0] (a): inputSchema and outputSchema must be JSON objects")):
        with pytest.raises(BadInput) as caught:
            parse_listing(bad, "x.json")
        assert caught.value.message == message
