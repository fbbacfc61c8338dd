"""The manifest language of issue 28: alternatives, `$optional`, conditional `requires_approval`, built
texts (`$format` and the quoting forms), text matchers; what `manifest check` says of each misuse, at
its line, and what the live check says of optional arguments."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reversi.core.drill import differences
from reversi.core.expect import first_mismatch, rule_holds
from reversi.core.json_values import JSONObjectView
from reversi.core.manifest import merge
from reversi.core.manifest_fit import fit_problems, key_lines
from reversi.core.manifest_prefix import prefixed
from reversi.core.manifest_yaml import parse_manifest
from reversi.core.references import NOTHING, ReferenceContext, RunContext, resolve
from reversi.core.tool_listing import parse_listing
from reversi.errors import MissingReference

RUN = RunContext("run_x", "ann", "acme", "prod")


def ctx(args: Any = None, result: Any = None, before: Any = NOTHING) -> ReferenceContext:
    return ReferenceContext(args={} if args is None else args, result=result, run=RUN, step=3, before=before)


def parse(body: str) -> tuple[list[Any], list[str]]:
    text = "version: 1\ntools:\n" + textwrap.indent(textwrap.dedent(body), "  ")
    entries, problems = parse_manifest(text, "m.yaml")
    return entries, [str(p) for p in problems]


# -- forms --------------------------------------------------------------------------------------------


def test_optional_leaves_a_missing_value_out_or_gives_its_default() -> None:
    template: JSONObjectView = {"title": "$args.title", "project": {"$optional": "$args.project"},
                                "folder": {"$optional": "$args.folder", "default": "main"},
                                "tags": [{"$optional": "$args.tag"}, "x"]}
    assert resolve(template, ctx({"title": "t"})) == {"title": "t", "folder": "main", "tags": ["x"]}
    assert resolve(template, ctx({"title": "t", "project": None, "folder": "f", "tag": 1})) == {
        "title": "t", "project": None, "folder": "f", "tags": [1, "x"]}
    with pytest.raises(MissingReference):
        resolve({"$optional": "$args.x"}, ctx())


def test_optional_takes_a_form_that_may_name_nothing() -> None:
    directory: JSONObjectView = {"$optional": {"$search": "$before.path", "pattern": "^(.*)/[^/]*$"}, "default": ""}
    assert resolve(directory, ctx(before={"path": "lists/a/b.md"})) == "lists/a"
    assert resolve(directory, ctx(before={"path": "b.md"})) == ""


def test_format_builds_a_text_and_the_quoting_forms_keep_a_value_one_token() -> None:
    template: JSONObjectView = {"$format": "DROP TABLE {table}; -- {{kept}} {n}",
                                "table": {"$sql_identifier": "$args.name"}, "n": "$args.n"}
    assert resolve(template, ctx({"name": 'a"b', "n": 3})) == 'DROP TABLE "a""b"; -- {kept} 3'
    assert resolve({"$sql_text": "$args.v"}, ctx({"v": "it's"})) == "'it''s'"
    assert resolve({"$argument": "$args.branch"}, ctx({"branch": "feature/x"})) == "feature/x"
    for hostile in ("--force", "-D", ""):
        with pytest.raises(MissingReference, match="could be taken for an option"):
            resolve({"$argument": "$args.branch"}, ctx({"branch": hostile}))
    for unquotable in ({"a": 1}, None, True, "a\x00b"):
        with pytest.raises(MissingReference, match="not a text"):
            resolve({"$sql_identifier": "$args.v"}, ctx({"v": unquotable}))


@given(st.text())
def test_a_quoted_identifier_reads_back_as_exactly_the_value(name: str) -> None:
    """Whatever the agent's text, the quoted form is one identifier whose value is that text."""
    if "\x00" in name:
        return
    quoted = resolve({"$sql_identifier": "$args.n"}, ctx({"n": name}))
    assert quoted.startswith('"') and quoted.endswith('"')
    inner = quoted[1:-1]
    assert inner.replace('""', "") .count('"') == 0 and inner.replace('""', '"') == name


def test_an_agents_statement_cannot_widen_the_drop_built_from_it() -> None:
    """docs/manifest.md's sqlite example: the name is the text up to the first space or parenthesis."""
    template: JSONObjectView = {"$format": "DROP TABLE {table}", "table": {"$sql_identifier": {
        "$search": "$args.query", "pattern": r"(?i)create\s+table\s+(?:if\s+not\s+exists\s+)?([^\s(]+)"}}}
    assert resolve(template, ctx({"query": "CREATE TABLE x; DROP TABLE customers"})) == 'DROP TABLE "x;"'
    assert resolve(template, ctx({"query": 'create table a"b(c)'})) == 'DROP TABLE "a""b"'


def test_search_takes_the_group_asked_for() -> None:
    query = {"q": "create table if not exists orders (id int)"}
    pattern = r"(?i)create\s+table\s+(if\s+not\s+exists\s+)?(\w+)"
    assert resolve({"$search": "$args.q", "pattern": pattern, "group": 2}, ctx(query)) == "orders"
    assert resolve({"$search": "$args.q", "pattern": pattern, "group": 0}, ctx(query)).endswith("orders")
    with pytest.raises(MissingReference):
        resolve({"$search": "$args.q", "pattern": pattern, "group": 3}, ctx(query))


def test_text_matchers_match_texts_only() -> None:
    assert first_mismatch({"text": {"$contains": "deleted"}}, {"text": "note deleted"}) is None
    assert first_mismatch({"text": {"$matches": "^note .*d$"}}, {"text": "note deleted"}) is None
    assert first_mismatch({"text": {"$matches": "^x"}}, {"text": "note"}) == (
        '`text` is "note", expected a text matching "^x"')
    assert first_mismatch({"n": {"$contains": "1"}}, {"n": 1}) == '`n` is 1, expected a text containing "1"'
    assert first_mismatch({"n": {"$contains": "1"}}, {}) == '`n` is missing, expected a text containing "1"'


def test_an_approval_rule_is_true_false_or_conditions_on_the_arguments() -> None:
    rule = {"$args.is_directory": True}
    assert rule_holds(rule, ctx({"is_directory": True}))
    assert not rule_holds(rule, ctx({"is_directory": False})) and not rule_holds(rule, ctx({}))
    assert rule_holds(True, ctx()) and not rule_holds(False, ctx())


# -- manifest check -----------------------------------------------------------------------------------


def test_alternatives_are_read_with_their_names_and_conditions() -> None:
    (entry,), problems = parse("""\
        w:
          requires_approval: {"$args.force": true}
          compensation:
            - {name: overwrite, tool: u, when: {"$args.x": 1}, requires_approval: {"$args.y": {$gt: 2}}}
            - {tool: d, residue: ["a log line"]}
        """)
    assert problems == []
    assert [c.tool for c in entry.compensations] == ["u", "d"]
    assert [entry.alternative_name(c) for c in entry.compensations] == ["overwrite", "#2"]
    assert entry.requires_approval == {"$args.force": True} and entry.residue == ("a log line",)


@pytest.mark.parametrize(("body", "expected"), [
    ("w:\n  compensation: []", "m.yaml:4: compensation: expected a compensation or a list of alternatives, got an "
                               "empty list"),
    ("w:\n  compensation:\n    - {tool: a}\n    - {tool: b}",
     'm.yaml:5: compensation[0] has no "when", so it always fits and the alternatives after it are never used: give '
     'it a "when" or move it last'),
    ("w:\n  compensation:\n    - {tool: a, name: x, when: {\"$args.a\": 1}}\n    - {tool: b, name: x}",
     'm.yaml:6: compensation[1]: the name "x" is given to two alternatives'),
    ("w:\n  compensation:\n    - {tool: a, when: {\"$args.a\": 1}}\n    - {args: {}}",
     'm.yaml:6: compensation[1]: missing "tool"'),
    ("w:\n  requires_approval: {\"$result.id\": 1}\n  irreversible: true",
     'm.yaml:4: "$result.id": requires_approval is decided before the call: only $args and $run are known then'),
    ("w:\n  compensation: {tool: u, requires_approval: {\"$before.x\": 1}}",
     'm.yaml:4: "$before.x": requires_approval is decided before the call: only $args and $run are known then'),
    ("w:\n  compensation: {tool: u, args: {a: {$optional: \"$args.x\", other: 1}}}",
     'm.yaml:4: unknown key "other" beside $optional and default'),
    ("w:\n  compensation: {tool: u, args: {a: {$optional: \"text\"}}}",
     'm.yaml:4: $optional: expected one reference to a value (or a form such as $search), got "text"'),
    ("w:\n  compensation: {tool: u, args: {a: {$format: \"DROP {t} {u}\", t: \"$args.t\"}}}",
     'm.yaml:4: $format: {u} has no template: add "u" beside $format'),
    ("w:\n  compensation: {tool: u, args: {a: {$format: \"DROP\", t: \"$args.t\"}}}",
     'm.yaml:4: $format: "t" is not used in the text (write {t} where it goes)'),
    ("w:\n  compensation: {tool: u, args: {a: {$format: 3}}}",
     "m.yaml:4: $format: expected a text with {NAME} parts, got 3"),
    ("w:\n  compensation: {tool: u, args: {a: {$sql_identifier: \"$args.t\", x: 1}}}",
     "m.yaml:4: $sql_identifier stands alone: {$sql_identifier: TEMPLATE} (beside it: x)"),
    ("w:\n  compensation: {tool: u, args: {a: {$search: \"$args.q\", pattern: \"x\", group: -1}}}",
     "m.yaml:4: $search.group: expected a group number (0: the whole match), got -1"),
    ("w:\n  compensation: {tool: u, when: {\"$args.q\": {$matches: \"(\"}}}",
     'm.yaml:4: $matches "(": not a regular expression RE2 runs: missing ): ('),
    ("w:\n  compensation: {tool: u, when: {\"$args.q\": {$contains: 1}}}",
     "m.yaml:4: $contains: expected a text, got 1"),
    ("w:\n  compensation:\n    tool: u\n    then: []",
     "m.yaml:6: compensation.then: expected a list of calls ({tool, args}), got an empty list"),
    ("w:\n  compensation:\n    tool: u\n    then:\n      - {tool: v}\n      - {args: {a: \"$args.a\"}}",
     'm.yaml:8: compensation.then[1]: missing "tool"'),
    ("w:\n  compensation:\n    tool: u\n    then:\n      - {tool: v, args: {a: \"$nope\"}}",
     'm.yaml:7: bad reference "$nope"'),
])
def test_manifest_check_names_each_misuse_at_its_line(body: str, expected: str) -> None:
    entries, problems = parse(body)
    assert entries == [] and problems == [expected]


LISTING = {"tools": [
    {"name": "write_note", "inputSchema": {"type": "object", "required": ["title", "content"], "properties": {
        "title": {"type": "string"}, "content": {"type": "string"}, "project": {"type": "string"}}}},
    {"name": "delete_note", "inputSchema": {"type": "object", "required": ["identifier"], "properties": {
        "identifier": {"type": "string"}, "project": {"type": "string"}}}},
    {"name": "read_note", "inputSchema": {"type": "object", "required": ["identifier"], "properties": {
        "identifier": {"type": "string"}, "project": {"type": "string"}}},
     "annotations": {"readOnlyHint": True}},
]}


def test_the_live_check_points_into_the_alternative_and_flags_optional_arguments() -> None:
    text = textwrap.dedent("""\
        version: 1
        tools:
          read_note: {effect: read}
          delete_note: {irreversible: true}
          write_note:
            capture: {tool: read_note, args: {identifier: "$args.title", project: {$optional: "$args.project"}}}
            compensation:
              - name: overwrite
                when: {"$before": {$exists: true}}
                tool: write_note
                args: {title: "$args.title", content: "$before.content", project: "$args.project"}
              - name: create
                tool: delete_note
                args: {identifier: "$args.title", projct: {$optional: "$args.project"}}
                then:
                  - tool: move_note
                    args: {identifier: "$args.title"}
        """)
    entries, problems = parse_manifest(text, "m.yaml")
    assert problems == []
    manifests, _ = merge([entries])
    found = fit_problems(manifests, parse_listing(LISTING, "l.json"), lines={"m.yaml": key_lines(text)})
    assert [str(p) for p in found] == [
        'm.yaml:11: warning: $args.project: "project" is optional in the input schema of write_note, and a call '
        'without it leaves this reference naming nothing: write {$optional: "$args.project"} (with default: VALUE '
        "where one is needed)",
        'm.yaml:14: warning: compensation[1].args.projct: delete_note has no argument "projct" declared: it may be '
        "ignored",
        "m.yaml:16: compensation[1].then[0] tool move_note: the server offers no such tool",
    ]


def test_prefixing_reaches_every_alternative_and_call_and_rewrites_an_aliased_name_once() -> None:
    text = textwrap.dedent("""\
        version: 1
        tools:
          w:
            verification: &read {tool: r, args: {}}
            compensation:
              - {name: a, when: {"$args.x": 1}, tool: u, verification: *read}
              - {tool: v, then: [{tool: m, args: {}}], verification: {tool: r2}}
        """)
    entries, problems = parse_manifest(prefixed(text, "bm"), "m.yaml")
    assert problems == []
    (entry,) = entries
    assert entry.pattern == "bm.w" and entry.verification is not None and entry.verification.tool == "bm.r"
    assert [(c.tool, [t.tool for t in c.then], c.verification.tool if c.verification else None)
            for c in entry.compensations] == [("bm.u", [], "bm.r"), ("bm.v", ["bm.m"], "bm.r2")]


def test_a_whole_expect_may_be_alternatives_one_of_them_an_error() -> None:
    expect = {"$any": [{"result": {"error": "NOTE_NOT_FOUND"}}, {"$error": "no files present"}]}
    assert first_mismatch(expect, {"result": {"error": "NOTE_NOT_FOUND"}}) is None
    assert first_mismatch(expect, None, "Project 'main': no files present") is None
    assert first_mismatch(expect, {"result": {"title": "x"}}) == (
        "`result.error` is missing, expected \"NOTE_NOT_FOUND\"; or the answer is {\"result\":{\"title\":\"x\"}}, "
        "expected an error")
    (entry,), problems = parse("""\
        w:
          compensation: {tool: u}
          verification: {tool: r, expect: {$any: [{$error: true}, {ok: true}]}}
          volatile: ["*.updated_at", "tail.result[*].id"]
        """)
    assert problems == [] and entry.volatile == ("*.updated_at", "tail.result[*].id")


def test_volatile_paths_are_left_out_of_a_drills_differences() -> None:
    before: JSONObjectView = {"find": {"nodes": [{"name": "a", "updated_at": "1"}]},
                              "tail": {"result": [{"id": 1, "x": 1}]}}
    after: JSONObjectView = {"find": {"nodes": [{"name": "a", "updated_at": "2"}]},
                             "tail": {"result": [{"id": 2, "x": 2}]}}
    assert differences(before, after) == ['find.nodes[0].updated_at: "1" -> "2"', "tail.result[0].id: 1 -> 2",
                                          "tail.result[0].x: 1 -> 2"]
    assert differences(before, after, volatile=["*.updated_at", "tail.result[*].id"]) == ["tail.result[0].x: 1 -> 2"]


def test_a_pattern_is_the_manifests_own_never_built_from_what_an_agent_sent() -> None:
    entries, problems = parse("""\
        w:
          compensation: {tool: u, when: {"$args.q": {$matches: "^${args.p}"}}}
        """)
    assert entries == [] and problems == [
        "m.yaml:4: $matches: a pattern is the manifest's own, with no references in it: match against a value, "
        "not with one"]
    (entry,), problems = parse('w:\n  compensation: {tool: u, when: {"$args.q": {$matches: "^a.*z$"}}}')
    assert problems == [] and entry.compensations[0].when == {"$args.q": {"$matches": "^a.*z$"}}
    assert first_mismatch({"$matches": "("}, "text") == 'the answer is "text", expected a text matching "("'


def test_the_text_of_an_answer_is_named_as_it_came() -> None:
    def with_texts(result: Any, result_text: str | None, before: Any = NOTHING,
                   before_text: str | None = None) -> ReferenceContext:
        return ReferenceContext(args={}, result=result, run=RUN, step=0, before=before, result_text=result_text,
                                before_text=before_text)

    assert resolve("$result_text", with_texts([], "[]")) == "[]"  # read as a list, kept as it came
    assert resolve("$result_text", with_texts("plain words", None)) == "plain words"  # text already
    assert resolve("$before_text", with_texts(None, None, [], "[]")) == "[]"
    with pytest.raises(MissingReference):
        resolve("$result_text", with_texts({"id": 1}, None))  # structured content: there was no text
    assert resolve("tables: ${before_text}", with_texts(None, None, "[]", "[]")) == "tables: []"
    entries, problems = parse('w:\n  compensation: {tool: u, when: {"$before_text": {$contains: "x"}}}')
    assert entries == [] and problems == ['m.yaml:4: "$before_text": $before_text needs a capture in this entry']
    entries, problems = parse('w:\n  compensation: {tool: u, when: {"$result_text": {$matches: "^ok"}}}')
    assert problems == [] and len(entries) == 1
