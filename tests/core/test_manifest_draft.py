"""`reversi manifest draft`'s guesses (`reversi.core.manifest_draft`), and the verdicts, differences and
coverage of drills (`reversi.core.drill`)."""

from __future__ import annotations

from typing import Any

from reversi.core.drill import Drill, Verdict, coverage_rows, differences, only_reads, verdict_of
from reversi.core.json_values import JSONObjectView
from reversi.core.manifest import merge
from reversi.core.manifest_draft import draft_manifest, undo_candidates
from reversi.core.manifest_fit import fit_problems
from reversi.core.manifest_yaml import parse_manifest
from reversi.core.tool_listing import parse_listing

NAMES = {"type": "array", "items": {"type": "string"}}
ITEMS = {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}


def tool(name: str, properties: dict[str, Any], required: list[str], output: dict[str, Any] | None = None,
         **hints: bool) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name, "inputSchema": {"type": "object", "properties": properties,
                                                           "required": required}, "annotations": hints}
    if output is not None:
        found["outputSchema"] = {"type": "object", "properties": output}
    return found


LISTING = parse_listing({"tools": [
    tool("create_things", {"things": ITEMS}, ["things"], {"things": ITEMS}, readOnlyHint=False),
    tool("delete_things", {"thingNames": NAMES}, ["thingNames"], readOnlyHint=False, destructiveHint=True),
    tool("starRepo", {"owner": {"type": "string"}, "repo": {"type": "string"}}, ["owner", "repo"],
         readOnlyHint=False),
    tool("unstarRepo", {"owner": {"type": "string"}, "repo": {"type": "string"}}, ["owner", "repo"],
         readOnlyHint=False),
    tool("add_note", {"note": {"type": "string"}}, ["note"], readOnlyHint=False),
    tool("remove_note", {"note_id": {"type": "string"}}, ["note_id"], readOnlyHint=False),
    tool("upsert_flag", {"on": {"type": "boolean"}}, [], readOnlyHint=False, idempotentHint=True),
    tool("send", {"to": {"type": "string"}}, ["to"]),
    tool("list_things", {}, [], readOnlyHint=True),
    tool("yes", {}, [], readOnlyHint=True),
]}, "listing.json", "things-server", "2.0")


def test_undo_names_follow_the_verb_in_snake_case_camel_case_and_dotted_names() -> None:
    assert list(undo_candidates("create_entities")) == ["delete_entities", "remove_entities", "destroy_entities"]
    assert list(undo_candidates("createIssue")) == ["deleteIssue", "removeIssue", "destroyIssue"]
    assert list(undo_candidates("github.star_repository")) == ["github.unstar_repository"]
    assert list(undo_candidates("unresolve_review_thread")) == ["resolve_review_thread"]
    assert list(undo_candidates("send_email")) == []


def test_the_draft_guesses_reads_idempotent_tools_and_undos_and_marks_every_guess() -> None:
    text = draft_manifest(LISTING)
    assert text.startswith("# Drafted by `reversi manifest draft` from things-server 2.0 (10 tools).\n")
    assert """
  create_things:
    # REVIEW: undo guessed from the names create_things / delete_things
    compensation:
      tool: delete_things
      args:
        thingNames: "$result.things[*].name"  # REVIEW: the name of each in the call's result things
  delete_things:
    # REVIEW: the server marks it destructive: what it destroys cannot be put back from its arguments alone
    # REVIEW: no undo found among the server's tools: add a compensation, or say it is irreversible: true
    {}
  starRepo:
    # REVIEW: undo guessed from the names starRepo / unstarRepo
    compensation:
      tool: unstarRepo
      args:
        owner: "$args.owner"  # REVIEW: the call's argument of the same name
        repo: "$args.repo"  # REVIEW: the call's argument of the same name
""" in text
    assert """
  add_note:
    # REVIEW: remove_note looks like its undo, but note_id could not be guessed: fill in, uncomment
    # compensation:
    #   tool: remove_note
    #   args:
    #     note_id: ...
  remove_note:
    # REVIEW: no undo found among the server's tools: add a compensation, or say it is irreversible: true
    {}
  upsert_flag:
    # REVIEW: the server marks it idempotent (a repeat changes nothing more); if its first call changes \
nothing either, say idempotent: true and a rollback skips it
    # REVIEW: no undo found among the server's tools: add a compensation, or say it is irreversible: true
    {}
  send:
    # REVIEW: the server does not say whether it only reads: taken as a write
    # REVIEW: no undo found among the server's tools: add a compensation, or say it is irreversible: true
    {}
  list_things:
    effect: read
  "yes":
    effect: read
""" in text


def test_the_draft_is_a_valid_manifest_that_fits_the_tools_it_was_drafted_from() -> None:
    entries, problems = parse_manifest(draft_manifest(LISTING), "draft.yaml")
    assert [p for p in problems if not p.warning] == []
    assert len(entries) == len(LISTING.tools)
    manifests, _ = merge([entries])
    assert [str(p) for p in fit_problems(manifests, LISTING) if not p.warning] == []


def test_differences_name_each_path_that_changed_and_a_drill_passes_only_when_undone() -> None:
    before: JSONObjectView = {"read_graph": {"entities": [{"name": "Ada", "observations": ["old"]}], "relations": []}}
    after: JSONObjectView = {"read_graph": {"entities": [{"name": "Ada", "observations": ["old", "new"]}],
                                            "relations": []},
                             "list": {"error": "gone"}}
    assert differences(before, after) == ['read_graph.entities[0].observations: ["old"] -> ["old","new"]',
                                          'list: (absent) -> {"error":"gone"}']
    assert differences(before, before) == []
    assert len(differences({"a": list(range(30))}, {"a": list(range(1, 31))})) == 21
    assert verdict_of(True, False, ()) is Verdict.RESTORED
    assert verdict_of(True, True, ("the charge shows on the statement",)) is Verdict.RESIDUE
    assert verdict_of(True, True, ()) is Verdict.DIFFERS
    assert verdict_of(False, False, ()) is Verdict.UNDO_FAILED
    assert verdict_of(True, False, (), tested=False) is Verdict.UNTESTED  # the call changed nothing to undo
    assert verdict_of(True, True, (), tested=False) is Verdict.DIFFERS  # yet the undo changed something
    assert [v.passed for v in Verdict] == [True, True, False, False, False]


def test_coverage_lists_each_write_tool_with_the_drill_that_says_most_of_its_undo() -> None:
    """Of the drills of that server and version: one of the entry in force before one of another, one
    that put the undo to the test before an untested one, one whose undo ran before a dry run's, then
    the newest."""
    text = "version: 1\ntools:\n  create_things:\n    compensation: {tool: delete_things, residue: [a log line]}\n" \
           "  delete_things: {irreversible: true}\n  upsert_flag: {idempotent: true}\n"
    entries, _ = parse_manifest(text, "m.yaml")
    manifests, _ = merge([entries])
    ran = {"entry": {"digest": entries[0].digest}, "undo": {"events": [{"type": "compensating"}]}}
    dry_run = {"entry": {"digest": entries[0].digest}, "undo": {"events": []}}
    drills = [Drill("d5", "create_things", "things-server", "9.9", Verdict.RESTORED, "2026-12-03T14:00:00Z", ran),
              Drill("d4", "create_things", "things-server", "2.0", Verdict.RESTORED, "2026-12-03T13:00:00Z", dry_run),
              Drill("d3", "create_things", "other-server", "1", Verdict.DIFFERS, "2026-12-03T12:00:00Z"),
              Drill("d2", "create_things", "things-server", "2.0", Verdict.RESTORED, "2026-12-03T11:00:00Z",
                    {**ran, "entry": {"digest": "old"}}),
              Drill("d1b", "create_things", "things-server", "2.0", Verdict.UNTESTED, "2026-12-03T10:30:00Z", ran),
              Drill("d1", "create_things", "things-server", "2.0", Verdict.DIFFERS, "2026-12-03T10:00:00Z", ran)]
    first = coverage_rows(manifests, LISTING, drills)[0]
    assert first.to_text() == \
        "create_things  undo: delete_things (compensation)  drilled 2026-12-03T10:00:00Z: differs; residue: a log line"
    assert coverage_rows(manifests, LISTING, drills[:4])[0].to_text().startswith(
        "create_things  undo: delete_things (compensation)  drilled 2026-12-03T13:00:00Z: restored "
        "(a call that needed no undo)")
    assert coverage_rows(manifests, LISTING, drills[2:4])[0].to_text().startswith(
        "create_things  undo: delete_things (compensation)  drilled 2026-12-03T11:00:00Z: restored "
        "(the entry changed since)")
    rows = [row.to_text() for row in coverage_rows(manifests, LISTING, drills)]
    assert rows[1:] == [
        "delete_things  undo: irreversible  not drilled",
        "starRepo  undo: no entry  not drilled",
        "unstarRepo  undo: no entry  not drilled",
        "add_note  undo: no entry  not drilled",
        "remove_note  undo: no entry  not drilled",
        "upsert_flag  undo: nothing to undo (idempotent)  not drilled",
        "send  undo: no entry  not drilled",
    ]


def test_a_tool_the_manifest_says_only_reads_is_no_write_tool_to_cover_or_drill() -> None:
    """The server says nothing of `send` (no readOnlyHint): the user's `effect: read` is the word."""
    entries, _ = parse_manifest("version: 1\ntools:\n  send: {effect: read}\n", "m.yaml")
    manifests, _ = merge([entries])
    send = LISTING.get("send")
    assert send is not None and send.writes and only_reads(send, manifests)
    assert "send" not in [row.tool for row in coverage_rows(manifests, LISTING, [])]
    assert not only_reads(send, merge([[]])[0])


STR = {"type": "string"}
NOTES = parse_listing({"tools": [
    tool("write_note", {"title": STR, "content": STR, "directory": STR}, ["title", "content", "directory"],
         readOnlyHint=False),
    tool("read_note", {"identifier": STR, "page": {"type": "integer"}}, ["identifier"], readOnlyHint=True),
    tool("edit_note", {"identifier": STR, "content": STR}, ["identifier", "content"], readOnlyHint=False),
    tool("delete_note", {"identifier": STR}, ["identifier"], readOnlyHint=False),
    tool("move_note", {"identifier": STR, "destination_path": STR}, ["identifier"], readOnlyHint=False),
    tool("move_file", {"source": STR, "destination": STR}, ["source", "destination"], readOnlyHint=False),
    tool("create_memory_project", {"project_name": STR}, ["project_name"], readOnlyHint=False),
    tool("delete_project", {"project_name": STR}, ["project_name"], readOnlyHint=False),
]}, "listing.json", "notes", "1.0")


def test_the_draft_proposes_captures_alternatives_self_inverse_moves_and_pairs_by_the_thing_they_act_on() -> None:
    """Issue 28 item 10: basic-memory's write tools were all drafted `{}`."""
    text = draft_manifest(NOTES)
    assert """
  write_note:
    # REVIEW: what it changes is read first with read_note ($before names the answer)
    capture:
      tool: read_note
      args: {identifier: "$args.title"}
    # REVIEW: every $before path below is a guess at what the read answers: confirm with a drill
    compensation:
      - name: overwritten
        when: {"$before": {$exists: true}}
        tool: write_note
        args: {title: "$before.title", content: "$before.content", directory: "$before.directory"}
        kind: inverse
      - name: created
        tool: delete_note
        args: {identifier: "$args.title"}
        kind: inverse
""" in text
    assert """
  move_note:
    # REVIEW: what it changes is read first with read_note ($before names the answer)
    capture:
      tool: read_note
      args: {identifier: "$args.identifier"}
    # REVIEW: every $before path below is a guess at what the read answers: confirm with a drill
    compensation:
      tool: move_note
      args: {identifier: "$args.identifier", destination_path: "$before.destination_path"}
      kind: inverse
""" in text
    assert """
  move_file:
    # REVIEW: its own undo, guessed from source/destination: move_file back the other way
    compensation:
      tool: move_file
      args: {source: "$args.destination", destination: "$args.source"}
      kind: inverse
""" in text
    pair = "# REVIEW: undo guessed from the names create_memory_project / delete_project"
    assert f"  create_memory_project:\n    {pair}" in text
    assert "  delete_note:\n    # REVIEW: what it changes is read first with read_note" in text
    assert "  edit_note:\n    # REVIEW: what it changes is read first with read_note" in text
    entries, problems = parse_manifest(text, "draft.yaml")
    assert [str(p) for p in problems] == ['draft.yaml:66: warning: delete_project has no compensation and is not '
                                          'marked irreversible: it will plan as unrecoverable ("no compensation '
                                          'declared")']
    manifests, _ = merge([entries])
    assert [str(p) for p in fit_problems(manifests, NOTES) if not p.warning] == []
