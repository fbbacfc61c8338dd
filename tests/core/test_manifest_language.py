"""The manifest language's later keys: capture and `$before`, `read_when`, `compensation.when`,
`irreversible` with a sentence, the `$each` and `$search` forms, `$exists` and `$error`; what
`manifest check` says of each misuse; and prefixing a manifest's tool names."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import yaml

from reversi.core.expect import first_mismatch, unmet_condition
from reversi.core.json_values import JSONObjectView
from reversi.core.manifest import Capture, ManifestSet
from reversi.core.manifest_prefix import prefixed
from reversi.core.manifest_yaml import parse_manifest
from reversi.core.models import (
    Event,
    Mode,
    RunRecord,
    RunSnapshot,
    Scope,
    StepRecord,
    StepState,
    StepStatus,
    derive_step,
)
from reversi.core.planner import plan_rollback
from reversi.core.references import NOTHING, ReferenceContext, RunContext, resolve
from reversi.errors import BadInput, MissingReference

RUN = RunContext("run_x", "ann", "acme", "prod")


def ctx(args: Any = None, result: Any = None, before: Any = NOTHING) -> ReferenceContext:
    return ReferenceContext(args={} if args is None else args, result=result, run=RUN, step=3, before=before)


def parse(body: str) -> tuple[list[Any], list[str]]:
    entries, problems = parse_manifest("version: 1\ntools:\n" + textwrap.indent(textwrap.dedent(body), "  "), "m.yaml")
    return entries, [str(p) for p in problems]


# -- references and forms ----------------------------------------------------------------------------


def test_each_builds_a_list_with_renamed_keys_from_every_element() -> None:
    template: JSONObjectView = {"$each": "$result.results",
                                "as": {"entityName": "$item.entityName", "observations": "$item.added"}}
    result = {"results": [{"entityName": "ada", "added": ["x"]}, {"entityName": "bob", "added": []}]}
    assert resolve({"deletions": template}, ctx(result=result)) == {
        "deletions": [{"entityName": "ada", "observations": ["x"]}, {"entityName": "bob", "observations": []}]
    }


def test_each_over_something_that_is_not_a_list_names_nothing_and_so_does_a_missing_item_key() -> None:
    with pytest.raises(MissingReference, match=r"\$result.one \(not a list, for \$each\)"):
        resolve({"$each": "$result.one", "as": "$item"}, ctx(result={"one": {"a": 1}}))
    with pytest.raises(MissingReference, match=r"\$item.nope"):
        resolve({"$each": "$result.all", "as": "$item.nope"}, ctx(result={"all": [{"a": 1}]}))


def test_excludes_holds_for_a_text_without_it_and_says_what_it_found() -> None:
    lossy = {"$before.content": {"$excludes": "\ufffd"}}
    assert unmet_condition(lossy, ctx(before={"content": "café"})) is None
    assert unmet_condition(lossy, ctx(before={"content": "caf\ufffd"})) == '`$before.content` contains "\ufffd"'
    assert unmet_condition(lossy, ctx(before={})) == '`$before.content` is missing, expected a text without "\ufffd"'
    assert first_mismatch({"name": {"$excludes": "x"}}, {"name": 3}) == '`name` is 3, expected a text without "x"'


def test_search_with_number_reads_the_match_as_a_number_or_names_nothing() -> None:
    url = {"id": 7, "url": "https://github.com/acme/shop/issues/42"}
    number: JSONObjectView = {"$search": "$result.url", "pattern": "/issues/(\\d+)$", "number": True}
    assert resolve(number, ctx(result=url)) == 42
    assert resolve({**number, "number": False}, ctx(result=url)) == "42"
    with pytest.raises(MissingReference, match="is not a number"):
        resolve({**number, "pattern": "/issues/(\\w+)$"}, ctx(result={"url": ".../issues/NaN"}))


def test_search_gives_the_first_group_of_the_first_match_or_names_nothing() -> None:
    status = "Repository status:\nOn branch main\nnothing to commit"
    assert resolve({"$search": "$before", "pattern": "^On branch (\\S+)$"}, ctx(before=status)) == "main"
    assert resolve({"$search": "$before", "pattern": "On branch \\S+"}, ctx(before=status)) == "On branch main"
    with pytest.raises(MissingReference, match="no match"):
        resolve({"$search": "$before", "pattern": "^On branch (\\S+)"}, ctx(before="HEAD detached at abc"))


def test_before_names_what_the_capture_read_and_nothing_when_there_is_none() -> None:
    assert resolve("$before.content", ctx(before={"content": "alpha"})) == "alpha"
    assert resolve("$before", ctx(before=None)) is None  # a capture may answer null
    with pytest.raises(MissingReference, match=r"\$before.content"):
        resolve("$before.content", ctx())


# -- expect and conditions ---------------------------------------------------------------------------


def test_exists_false_matches_a_missing_key_and_exists_true_a_present_one() -> None:
    assert first_mismatch({"deleted_at": {"$exists": False}}, {"id": 1}) is None
    assert first_mismatch({"id": {"$exists": True}}, {"id": None}) is None
    assert first_mismatch({"id": {"$exists": False}}, {"id": 1}) == "`id` is 1, expected it absent"
    assert first_mismatch({"id": {"$exists": True}}, {}) == "`id` is missing, expected it present"


def test_an_expected_error_matches_only_an_error_answer_containing_its_text() -> None:
    assert first_mismatch({"$error": True}, None, "ENOENT: no such file") is None
    assert first_mismatch({"$error": "ENOENT"}, None, "ENOENT: no such file") is None
    assert first_mismatch({"$error": "ENOENT"}, None, "EACCES") == (
        'the error is "EACCES", expected one containing "ENOENT"')
    assert first_mismatch({"$error": True}, {"content": "x"}) == 'the answer is {"content":"x"}, expected an error'
    assert first_mismatch({"content": "x"}, None, "ENOENT") == "the read answered an error: ENOENT"


def test_conditions_hold_when_every_reference_matches_and_a_missing_one_holds_only_exists_false() -> None:
    dry = {"$args.dryRun": True}
    assert unmet_condition(dry, ctx(args={"dryRun": True})) is None
    assert unmet_condition(dry, ctx(args={"dryRun": False})) == "`$args.dryRun` is false, expected true"
    assert unmet_condition(dry, ctx(args={})) == "`$args.dryRun` is missing, expected true"
    assert unmet_condition({"$before": {"$exists": False}}, ctx()) is None
    assert unmet_condition({"$before": {"$exists": True}}, ctx(before={"x": 1})) is None


def test_a_long_answer_is_cut_short_in_a_mismatch() -> None:
    found = unmet_condition({"$before": "Staged changes:\n"}, ctx(before="Staged changes:\n" + "+line\n" * 100))
    assert found is not None and found.endswith('..., expected "Staged changes:\\n"') and len(found) < 260


# -- parsing and checking ----------------------------------------------------------------------------


def test_every_new_key_is_read_into_the_entry() -> None:
    entries, problems = parse("""
        edit_file:
          read_when: {"$args.dryRun": true}
          capture: {tool: read_text_file, args: {path: "$args.path"}, absent_on_error: ENOENT}
          compensation:
            tool: write_file
            args: {path: "$args.path", content: "$before.content"}
            when: {"$before": {$exists: true}}
          verification: {tool: stat, args: {path: "$args.path"}, expect: {$error: ENOENT}}
        mail.send:
          irreversible: "the email stays sent"
    """)
    assert problems == []
    edit, mail = entries
    assert edit.capture == Capture("read_text_file", {"path": "$args.path"}, "ENOENT")
    assert edit.read_when == {"$args.dryRun": True}
    assert edit.compensations[0].when == {"$before": {"$exists": True}}
    assert edit.verification.expect == {"$error": "ENOENT"}
    assert (mail.irreversible, mail.irreversible_reason) == (True, "the email stays sent")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('t:\n  capture: {tool: r, args: {x: "$result.id"}}\n  irreversible: true',
         'm.yaml:4: "$result.id": a capture runs before the call: only $args and $run are known then'),
        ('t:\n  compensation: {tool: u, args: {x: "$before.id"}}',
         'm.yaml:4: "$before.id": $before needs a capture in this entry'),
        ('t:\n  compensation: {tool: u, args: {x: "$item.id"}}',
         'm.yaml:4: "$item.id": $item is only known inside the "as" of a $each'),
        ('t:\n  compensation: {tool: u, args: {x: {$each: "$result.all"}}}',
         'm.yaml:4: $each: missing "as" (the template for each element, where $item names it)'),
        ('t:\n  compensation: {tool: u, args: {x: {$each: [1], as: 1}}}',
         "m.yaml:4: $each: expected one reference to a list, got a list"),
        ('t:\n  compensation: {tool: u, args: {x: {$search: "$result", pattern: "("}}}',
         'm.yaml:4: $search.pattern "(": not a regular expression RE2 runs: missing ): ('),
        ('t:\n  compensation: {tool: u, args: {x: {$search: "$result", pattern: "a", as: 1}}}',
         'm.yaml:4: unknown key "as" beside $search, group, number and pattern'),
        ('t:\n  compensation: {tool: u, args: {x: u}, when: {"$args.x": {$excludes: 3}}}',
         "m.yaml:4: $excludes: expected a text, got 3"),
        ('t:\n  compensation: {tool: u, args: {x: u}, when: {"$args.x": {$excludes: a, b: 1}}}',
         "m.yaml:4: $excludes stands alone: {$excludes: TEXT}"),
        ('t:\n  compensation: {tool: u, args: {x: {$search: "$result", pattern: "a", number: 1}}}',
         "m.yaml:4: $search.number: expected true or false, got 1"),
        ('t:\n  read_when: {dryRun: true}\n  irreversible: true',
         'm.yaml:4: read_when: "dryRun" is not a reference: write e.g. "$args.dryRun"'),
        ("t:\n  read_when: {}\n  irreversible: true",
         "m.yaml:4: read_when: expected a mapping from references to values, got a mapping"),
        ('t:\n  compensation: {tool: u, when: {"$args.x": {$exists: maybe}}}',
         'm.yaml:4: $exists: expected true or false, got "maybe"'),
        ('t:\n  compensation: {tool: u}\n  verification: {tool: r, expect: {a: {$exist: true}}}',
         'm.yaml:5: unknown operator "$exist" (known: $exists, $excludes, $contains, $matches, $not, $any, $gt, '
         "$gte, $lt, $lte, and $error in expect)"),
        ('t:\n  compensation: {tool: u}\n  verification: {tool: r, expect: {a: {$error: true}}}',
         "m.yaml:5: $error is only allowed as the whole expect: {$error: true} or {$error: TEXT}"),
        ('t:\n  compensation: {tool: u}\n  verification: {tool: r, expect: {$error: true, a: 1}}',
         "m.yaml:5: $error stands alone: expect {$error: true} or {$error: TEXT}"),
        ("t:\n  capture: {tool: r, absent_on_error: 3}\n  irreversible: true",
         "m.yaml:4: capture.absent_on_error: expected a text, got 3"),
        ("t:\n  capture: {args: {}}\n  irreversible: true", 'm.yaml:4: capture: missing "tool"'),
        ("t:\n  irreversible: yes", 'm.yaml:4: irreversible: expected true, false or a sentence saying what stays, '
                                    'got "yes"'),
    ],
)
def test_manifest_check_names_each_misuse_of_the_new_keys_at_its_line(body: str, expected: str) -> None:
    entries, problems = parse(body)
    assert entries == [] and problems == [expected]


def test_a_regular_expression_may_end_with_a_dollar_anchor() -> None:
    assert parse('t:\n  compensation: {tool: u, args: {b: {$search: "$result", pattern: "x$"}}}')[1] == []


# -- the plan --------------------------------------------------------------------------------------------

MANIFEST = """\
version: 1
tools:
  edit:
    read_when: {"$args.dryRun": true}
    capture: {tool: read, args: {path: "$args.path"}, absent_on_error: ENOENT}
    compensation: {tool: write, args: {path: "$args.path", content: "$before.content"}}
  stage:
    capture: {tool: staged, args: {}}
    compensation: {tool: unstage, when: {"$before": ""}}
  send:
    irreversible: "the email stays sent"
"""


def _snapshot(*steps: tuple[str, dict[str, Any], dict[str, Any]]) -> RunSnapshot:
    run = RunRecord("run_x", "p", Mode.OBSERVE, Scope("ann", "acme", "prod"), {}, "2026-01-01T00:00:00Z")
    states: list[StepState] = []
    for index, (tool, args, intended) in enumerate(steps):
        record = StepRecord("run_x", index, tool, args)
        events = [Event("run_x", 2 * index, index, "intended", "t", "ann", {"tool": tool, "args": args, **intended}),
                  Event("run_x", 2 * index + 1, index, "succeeded", "t", "ann", {"result": "ok"})]
        states.append(derive_step(record, events))
    return RunSnapshot(run, tuple(states))


def test_the_plan_reads_the_before_from_the_intended_event_and_says_why_it_is_missing() -> None:
    manifests = ManifestSet(parse_manifest(MANIFEST, "m.yaml")[0])
    snapshot = _snapshot(
        ("edit", {"path": "a", "dryRun": True}, {}),
        ("edit", {"path": "a"}, {"before": {"content": "alpha"}}),
        ("edit", {"path": "b"}, {"before_absent": "ENOENT: no such file"}),
        ("edit", {"path": "c"}, {}),
        ("stage", {}, {"before": "something staged"}),
        ("stage", {}, {"before": ""}),
        ("send", {}, {}),
    )
    assert snapshot.step(1).before == {"content": "alpha"} and snapshot.step(2).before_absent == "ENOENT: no such file"
    actions = {a.step: a for a in plan_rollback(snapshot, manifests).actions}
    assert (actions[0].kind.value, actions[0].reason) == ("skip", "read")
    assert actions[1].compensation is not None and actions[1].compensation.args == {"path": "a", "content": "alpha"}
    assert actions[2].reason == ("compensation arguments unavailable: $before.content "
                                 "(the capture found nothing before the call: ENOENT: no such file)")
    assert actions[3].reason == ("compensation arguments unavailable: $before.content "
                                 "(nothing was captured before the call)")
    assert actions[4].reason == ('the compensation does not fit this call: `$before` is "something staged", '
                                 'expected ""')
    assert actions[5].kind.value == "compensate"
    assert actions[6].reason == "cannot be undone: the email stays sent"


def test_a_step_status_other_than_succeeded_keeps_its_before() -> None:
    state = _snapshot(("edit", {"path": "a"}, {"before": {"content": "x"}})).step(0)
    assert state.status is StepStatus.SUCCEEDED and state.has_before


# -- prefixes --------------------------------------------------------------------------------------------


def test_a_prefixed_manifest_names_every_tool_with_the_prefix_and_keeps_its_comments() -> None:
    text = textwrap.dedent("""\
        version: 1
        tools:
          create:   # makes one
            capture: {tool: read, args: {id: "$args.id"}}
            compensation:
              tool: delete
              args: {id: "$result.id"}
            verification: {tool: "read", args: {id: "$result.id"}, expect: {$error: true}}
          commit:
            requires: [create, "get_*"]
            irreversible: true
    """)
    out = prefixed(text, "mem")
    assert "  mem.create:   # makes one\n" in out
    data = yaml.safe_load(out)
    assert list(data["tools"]) == ["mem.create", "mem.commit"]
    create = data["tools"]["mem.create"]
    assert (create["capture"]["tool"], create["compensation"]["tool"], create["verification"]["tool"]) == (
        "mem.read", "mem.delete", "mem.read")
    assert data["tools"]["mem.commit"]["requires"] == ["mem.create", "mem.get_*"]
    assert parse_manifest(out, "p.yaml")[1] == []


@pytest.mark.parametrize("name", ["a b", "*", "a.b", "mem.", "a/b", "x" * 65, ""])
def test_a_prefix_must_be_a_name_the_gateway_takes_for_an_upstream(name: str) -> None:
    with pytest.raises(BadInput, match=r"a prefix is an upstream's name \(1-64 of letters, digits, _ and -\)"):
        prefixed("version: 1\ntools: {}\n", name)


# -- $not, $any and comparisons ----------------------------------------------------------------------


def test_not_tells_an_explicit_false_and_an_absent_flag_from_true() -> None:
    single: JSONObjectView = {"$args.is_directory": {"$not": True}}
    assert unmet_condition(single, ctx(args={"is_directory": False})) is None
    assert unmet_condition(single, ctx(args={})) is None  # nothing at all is not true either
    assert unmet_condition(single, ctx(args={"is_directory": True})) == \
        "`$args.is_directory` is true, expected anything but true"
    assert unmet_condition({"$args.is_directory": {"$not": {"$exists": False}}}, ctx(args={})) == \
        '`$args.is_directory` is missing, expected anything but {"$exists":false}'


def test_any_holds_when_one_choice_matches_and_comparisons_take_numbers_only() -> None:
    kind: JSONObjectView = {"$args.kind": {"$any": ["note", {"$excludes": "/"}]}}
    assert unmet_condition(kind, ctx(args={"kind": "note"})) is None
    assert unmet_condition(kind, ctx(args={"kind": "folder/x"})) == \
        '`$args.kind` is "folder/x", expected one of ["note",{"$excludes":"/"}]'
    big = {"$args.amount": {"$gt": 1000}}
    assert unmet_condition(big, ctx(args={"amount": 1000.5})) is None
    assert unmet_condition(big, ctx(args={"amount": 1000})) == "`$args.amount` is 1000, expected a number > 1000"
    assert unmet_condition(big, ctx(args={"amount": True})) == "`$args.amount` is true, expected a number > 1000"
    assert unmet_condition({"$args.n": {"$lte": 2}}, ctx(args={})) == "`$args.n` is missing, expected a number <= 2"
    assert first_mismatch({"count": {"$gte": 1}, "state": {"$not": "open"}}, {"count": 1, "state": "closed"}) is None


def test_the_new_operators_are_checked_where_they_are_written() -> None:
    _, problems = parse("""\
        t:
          compensation:
            tool: u
            when:
              "$args.a": {$not: true, $gt: 1}
              "$args.b": {$any: []}
              "$args.c": {$gt: "ten"}
              "$args.d": {$lt: true}
              "$args.e": {$any: [{$nope: 1}]}
              "$args.f": {$not: "$nothing.here"}
        """)
    assert problems == [  # each on its own line (the file's first two are `version` and `tools`)
        "m.yaml:7: $not stands alone: {$not: ...}",
        "m.yaml:8: $any: expected a list of what may match, got an empty list",
        'm.yaml:9: $gt: expected a number, got "ten"',
        "m.yaml:10: $lt: expected a number, got true",
        'm.yaml:11: unknown operator "$nope" (known: $exists, $excludes, $contains, $matches, $not, $any, $gt, '
        "$gte, $lt, $lte, and $error in expect)",
        'm.yaml:12: bad reference "$nothing.here"',
    ]
