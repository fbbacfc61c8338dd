"""Alternatives, optional arguments, conditional approval and built texts, planned and rolled back in a
real store (issue 28, items 1, 3, 5 and 6). The "world" is a folder of notes and a real SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import reversi
from reversi.errors import ApprovalRequired, ToolAnsweredError

NOTES = """\
version: 1
tools:
  notes.write:
    capture: {tool: notes.read, args: {title: "$args.title"}, absent_on_error: "not found"}
    compensation:
      - name: overwrite
        when: {"$before": {$exists: true}}
        tool: notes.write
        args: {title: "$args.title", content: "$before.content", folder: {$optional: "$args.folder"}}
        kind: inverse
      - name: create
        tool: notes.delete
        args: {title: "$args.title", folder: {$optional: "$args.folder", default: "main"}}
        kind: inverse
  notes.delete:
    requires_approval: {"$args.is_directory": true}
    capture: {tool: notes.read, args: {title: "$args.title"}}
    compensation:
      tool: notes.write
      args: {title: "$args.title", content: "$before.content"}
      requires_approval: {"$args.title": {$any: ["index", "home"]}}
"""


class Notes:
    """A folder of notes, as a knowledge-base server keeps them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[dict[str, Any]] = []

    def read(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        path = self.root / f"{args['title']}.md"
        if not path.exists():
            raise ToolAnsweredError(f"note {args['title']!r} not found")
        return {"content": path.read_text()}

    def write(self, title: str, content: str, folder: str = "main", **_: Any) -> dict[str, Any]:
        (self.root / f"{title}.md").write_text(content)
        return {"ok": True}

    def delete(self, title: str, **_: Any) -> dict[str, Any]:
        (self.root / f"{title}.md").unlink()
        return {"ok": True}

    def compensate(self, call: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(call)
        tool = call["tool"].removeprefix("notes.")
        return self.write(**call["args"]) if tool == "write" else self.delete(**call["args"])

    def files(self) -> dict[str, str]:
        return {p.name: p.read_text() for p in sorted(self.root.iterdir())}


@pytest.fixture
def notes(tmp_path: Path) -> Notes:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "index.md").write_text("# Index\n")
    (root / "todo.md").write_text("- milk\n")
    return Notes(root)


def _ledger(db_url: str, tmp_path: Path, text: str) -> Any:
    (tmp_path / "tools.yaml").write_text(text)
    return reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")])


def test_a_write_is_undone_as_an_overwrite_or_a_create_as_the_capture_found(
        db_url: str, tmp_path: Path, notes: Notes) -> None:
    before = notes.files()
    with _ledger(db_url, tmp_path, NOTES) as ledger:
        run = ledger.start_run()
        run.call("notes.write", {"title": "todo", "content": "- eggs\n"}, notes.write, capture=notes.read)
        run.call("notes.write", {"title": "idea", "content": "fly\n", "folder": "drafts"}, notes.write,
                 capture=notes.read)
        plan = {a.step: a for a in run.plan().actions}
        assert plan[0].compensation is not None and plan[1].compensation is not None
        assert (plan[0].compensation.alternative, plan[0].compensation.tool) == ("overwrite", "notes.write")
        assert plan[0].compensation.chosen_because == 'its conditions hold ({"$before":{"$exists":true}})'
        assert plan[0].compensation.args == {"title": "todo", "content": "- milk\n"}  # no folder: left out
        assert (plan[1].compensation.alternative, plan[1].compensation.tool) == ("create", "notes.delete")
        assert plan[1].compensation.chosen_because == ("overwrite: `$before` is missing, expected it present; "
                                                       "it always fits")
        assert plan[1].compensation.args == {"title": "idea", "folder": "drafts"}
        assert plan[1].to_dict()["alternative"] == "create"
        assert "compensate -> notes.delete  (create: overwrite: `$before` is missing" in plan[1].describe()
        report = run.rollback(notes.compensate)
    assert report.complete and sorted(report.compensated) == [0, 1]
    assert notes.files() == before


def test_no_alternative_that_fits_plans_unrecoverable_naming_each(db_url: str, tmp_path: Path, notes: Notes) -> None:
    text = NOTES.replace("      - name: create\n", "      - name: create\n        when: {\"$args.title\": \"x\"}\n")
    with _ledger(db_url, tmp_path, text) as ledger:
        run = ledger.start_run()
        run.call("notes.write", {"title": "idea", "content": "fly\n"}, notes.write, capture=notes.read)
        (action,) = run.plan().actions
    assert action.kind.value == "unrecoverable"
    assert action.reason == ("no compensation fits this call: overwrite: `$before` is missing, expected it present; "
                             'create: `$args.title` is "idea", expected "x"')


def test_approval_follows_the_arguments_for_the_call_and_for_its_undo(
        db_url: str, tmp_path: Path, notes: Notes) -> None:
    with _ledger(db_url, tmp_path, NOTES) as ledger:
        run = ledger.start_run()
        with pytest.raises(ApprovalRequired):  # a folder delete waits for a person
            run.call("notes.delete", {"title": "todo", "is_directory": True}, notes.delete, capture=notes.read)
        assert notes.files()["todo.md"] == "- milk\n"
        run.call("notes.delete", {"title": "todo", "is_directory": False}, notes.delete, capture=notes.read)
        run.call("notes.delete", {"title": "index"}, notes.delete, capture=notes.read)
        needs = {a.step: a.compensation.needs_approval for a in run.plan().actions if a.compensation}
        assert needs == {0: False, 1: True}  # the index page's undo waits for an approval; the to-do's not
        report = run.rollback(notes.compensate)
        assert report.compensated == [0] and [w.step for w in report.awaiting_approval] == [1]


SQL = """\
version: 1
tools:
  db.write_query:
    compensation:
      - name: drop the quoted table it made
        when: {"$args.query": {$matches: '(?i)^\\s*create\\s+table\\s+(if\\s+not\\s+exists\\s+)?"'}}
        tool: db.write_query
        args:
          query:
            $format: "DROP TABLE {table}"
            table:
              $sql_identifier: {$search: "$args.query", pattern: '(?i)create\\s+table\\s+[^"]*"([^"]+)"'}
      - name: drop the table it made
        when: {"$args.query": {$matches: '(?i)^\\s*create\\s+table\\s'}}
        tool: db.write_query
        args:
          query:
            $format: "DROP TABLE {table}"
            table:
              $sql_identifier:
                $search: "$args.query"
                pattern: '(?i)create\\s+table\\s+(?:if\\s+not\\s+exists\\s+)?([^\\s(]+)'
"""


def test_the_drop_is_built_from_the_agents_own_statement_and_quoted(db_url: str, tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "shop.db", isolation_level=None)
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    schema_before = db.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()

    def write_query(query: str) -> dict[str, Any]:
        db.execute(query)
        return {"ok": True}

    hostile = 'CREATE TABLE "x; DROP TABLE customers; --" (a)'
    with _ledger(db_url, tmp_path, SQL) as ledger:
        run = ledger.start_run()
        run.call("db.write_query", {"query": "create table if not exists orders (id INTEGER, total REAL)"},
                 write_query)
        run.call("db.write_query", {"query": hostile}, write_query)
        run.call("db.write_query", {"query": "INSERT INTO orders VALUES (1, 2.5)"}, write_query)
        plan = {a.step: a for a in run.plan().actions}
        assert plan[0].compensation is not None and plan[1].compensation is not None
        assert plan[0].compensation.args == {"query": 'DROP TABLE "orders"'}
        assert plan[1].compensation.args == {"query": 'DROP TABLE "x; DROP TABLE customers; --"'}
        assert plan[1].compensation.alternative == "drop the quoted table it made"
        assert plan[2].kind.value == "unrecoverable"
        report = run.rollback(lambda call: write_query(**call["args"]))
    assert report.compensated == [1, 0]  # the insert stays, said so; the tables it made are gone, no other
    assert db.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall() == schema_before
