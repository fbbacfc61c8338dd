"""The store's SQL lives in `.sql` files of named statements, read by `reversi.store.sql`."""

from __future__ import annotations

import pytest

from reversi.errors import SchemaFilesError
from reversi.store.sql import fill, marks, optional, parse


def test_a_file_is_read_as_its_named_statements_without_comments_or_the_closing_semicolon() -> None:
    found = parse(
        "-- Written for both SQLite and PostgreSQL.\n\n"
        "-- name: columns\n-- What a row is read from.\nrun_id, step\n\n"
        "-- name: steps\n-- A run's steps.\nSELECT {columns} FROM steps\n  -- in order\n  WHERE run_id = ? {limit};\n",
        "t.sql",
    )
    assert found == {"columns": "run_id, step", "steps": "SELECT run_id, step FROM steps\n  WHERE run_id = ? {limit}"}


@pytest.mark.parametrize(("text", "message"), [
    ("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n", r"t.sql:3: 'a' is named twice"),
    ("-- Nothing but a comment.\n", r"t.sql names no statement"),
    ("", r"t.sql names no statement"),
    ("SELECT 1\n-- name: a\nSELECT 2\n", r"t.sql:1: SQL before the first `-- name:` line"),
    ("-- name: a\n-- name: b\nSELECT 2\n", r"t.sql: 'a' has no statement"),
    ("-- name: Big\nSELECT 1\n", r"t.sql:1: 'Big' is not a name"),
    ("-- name: a\nSELECT {b}\n-- name: b\n{a}\n", r"t.sql: 'a' holds itself"),
])
def test_a_file_that_breaks_the_rules_is_refused_as_it_is_read(text: str, message: str) -> None:
    with pytest.raises(SchemaFilesError, match=message):
        parse(text, "t.sql")


def test_a_slot_left_empty_takes_its_space_along_and_one_not_given_is_a_key_error() -> None:
    text = "{guard} SELECT a FROM t WHERE b = ? {filter} ORDER BY a {limit}"
    assert fill(text, guard="", filter="AND c = ?", limit="") == "SELECT a FROM t WHERE b = ? AND c = ? ORDER BY a"
    with pytest.raises(KeyError, match=r"no SQL given for the slot \{limit\}"):
        fill(text, guard="", filter="")


def test_an_optional_part_adds_its_values_only_when_none_is_missing() -> None:
    params: list[object] = [1]
    assert optional("AND a = ?", params, None) == ""
    assert optional("AND (b < ? OR b = ?)", params, "x", "x") == "AND (b < ? OR b = ?)"
    assert optional("AND c = ?", params, 0) == "AND c = ?"
    assert params == [1, "x", "x", 0]
    assert marks(3) == "?, ?, ?"
    assert marks(2, "(?, ?)") == "(?, ?), (?, ?)"
