"""Conditions with `$not`, `$any` and comparisons decide a plan in a real store (issue 28, item 4)."""

from __future__ import annotations

from pathlib import Path

import reversi

MANIFEST = """\
version: 1
tools:
  notes.delete:
    capture: {tool: notes.read, args: {path: "$args.path"}}
    compensation:
      tool: notes.write
      args: {path: "$args.path", content: "$before.content"}
      when: {"$args.is_directory": {$not: true}}
    requires_approval: false
  payments.send:
    compensation:
      tool: payments.recall
      args: {id: "$result.id"}
      when: {"$args.amount": {$lte: 10000}, "$args.rail": {$any: ["ach", "sepa"]}}
"""


def test_a_single_note_delete_is_undone_and_a_folder_delete_or_a_big_wire_is_not(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    read = {"notes/a.md": {"content": "alpha"}, "notes": {"content": ""}}
    with reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")]) as ledger:
        run = ledger.start_run()
        for args in ({"path": "notes/a.md", "is_directory": False}, {"path": "notes/a.md"},
                     {"path": "notes", "is_directory": True}):
            run.call("notes.delete", args, lambda **kw: {"ok": True}, capture=lambda tool, a: read[a["path"]])
        for args in ({"amount": 500, "rail": "ach"}, {"amount": 50_000, "rail": "ach"}, {"amount": 5, "rail": "swift"}):
            run.call("payments.send", args, lambda **kw: {"id": "p_1"})
        plan = {a.step: (a.kind.value, a.reason) for a in run.plan().actions}
    assert [plan[s][0] for s in range(6)] == ["compensate", "compensate", "unrecoverable", "compensate",
                                             "unrecoverable", "unrecoverable"]
    assert plan[2][1] == ("the compensation does not fit this call: `$args.is_directory` is true, expected anything "
                          "but true")
    assert plan[4][1] == "the compensation does not fit this call: `$args.amount` is 50000, expected a number <= 10000"
    assert plan[5][1] == ('the compensation does not fit this call: `$args.rail` is "swift", expected one of '
                          '["ach","sepa"]')
