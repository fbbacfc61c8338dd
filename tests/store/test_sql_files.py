"""The store's SQL lives in `.sql` files of named statements (`reversi.store.sql`): each one is run by the
store, each one the store asks for is there, and no module of the store writes SQL of its own."""

from __future__ import annotations

import ast
import re
import tomllib
from collections import defaultdict
from importlib import resources
from pathlib import Path, PurePosixPath

import pytest

import reversi.store
from reversi.errors import SchemaFilesError
from reversi.store.schema import SHARED
from reversi.store.sql import fill, load, marks, optional, parse

STORE = Path(reversi.store.__file__).parent
ROOT = STORE.parents[2]
# A back end's own statements, loaded by its module alone, say so on their first line.
BACKEND_FILES = {"sqlite.sql": "-- Written for SQLite only.", "postgres.sql": "-- Written for PostgreSQL only."}
# What a statement starts with, and what only SQL holds: the words of SQL as we write them (upper case).
_STATEMENT = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP|PRAGMA|SET|BEGIN|COMMIT|ROLLBACK|"
                        r"SAVEPOINT|RELEASE)\b")
_CLAUSE = re.compile(r"\b(FROM|WHERE|VALUES|JOIN|ORDER BY|GROUP BY|LIMIT|RETURNING|ON CONFLICT|FOR UPDATE|LIKE|"
                     r"EXISTS|AND|OR|IS NULL|IS NOT NULL)\b")


def query_files() -> list[str]:
    """Every file of named statements: the store's `.sql` files but the fresh store's script."""
    return sorted(f.name for f in resources.files("reversi.store").iterdir()
                  if f.name.endswith(".sql") and f.name != "schema.sql")


def modules() -> dict[str, ast.Module]:
    return {str(path.relative_to(STORE)): ast.parse(path.read_text()) for path in sorted(STORE.rglob("*.py"))}


def _loaded(node: ast.AST) -> str | None:
    """The file a `load("x.sql")` call reads (`reversi.store.sql.load`, imported by its name)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "load":
        assert len(node.args) == 1 and isinstance(node.args[0], ast.Constant), ast.unparse(node)
        return str(node.args[0].value)
    return None


def asked() -> dict[str, dict[str, set[str]]]:
    """By file, each statement name the store's modules ask for, with the modules that ask."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for module, tree in modules().items():
        files = {target.id: file for node in tree.body if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name) and (file := _loaded(node.value))}
        for node in ast.walk(tree):
            file = _loaded(node)
            if file is not None:
                found[file]  # a file loaded and never asked anything is still a file in use
            if isinstance(node, ast.Subscript):
                file = _loaded(node.value) or files.get(getattr(node.value, "id", ""))
                if file is not None:
                    assert isinstance(node.slice, ast.Constant), f"{module}: a statement asked by a computed name"
                    found[file][str(node.slice.value)].add(module)
    return found


def test_every_statement_of_the_files_is_run_by_the_store() -> None:
    wanted = asked()
    unused = []
    for file in query_files():
        text = resources.files("reversi.store").joinpath(file).read_text()
        for name in load(file):
            # (a column list, say, is put into the statements of its file that name it)
            if name not in wanted[file] and "{" + name + "}" not in text:
                unused.append(f"{file}: {name}")
    assert unused == []


def test_every_statement_the_store_asks_for_is_in_its_file() -> None:
    missing = [f"{file}: {name} (asked by {', '.join(sorted(by))})" for file, names in asked().items()
               for name, by in names.items() if file not in query_files() or name not in load(file)]
    assert missing == []
    assert set(asked()) == set(query_files())


def test_a_back_ends_statements_are_run_by_that_back_end_alone() -> None:
    for file, names in asked().items():
        if file in BACKEND_FILES:
            assert {module for by in names.values() for module in by} == {file.replace(".sql", ".py")}


def test_each_file_says_on_its_first_line_which_back_ends_it_is_written_for() -> None:
    for file in query_files():
        first = resources.files("reversi.store").joinpath(file).read_text().splitlines()[0]
        assert first == BACKEND_FILES.get(file, SHARED), file


def _docstrings(tree: ast.Module) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def test_no_module_of_the_store_holds_sql_of_its_own() -> None:
    found = []
    for module, tree in modules().items():
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in docstrings:
                text = node.value.decode() if isinstance(node.value, bytes) else node.value
                if _STATEMENT.match(text) or _CLAUSE.search(text):
                    found.append(f"{module}:{node.lineno}: {text!r}")
    assert found == []


def test_every_sql_file_of_the_store_ships_in_the_wheel() -> None:
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["reversi"]
    package = STORE.parent
    files = [PurePosixPath(path.relative_to(package).as_posix()) for path in STORE.rglob("*.sql")]
    assert len(files) > 30
    assert [str(f) for f in files if not any(f.match(glob) and len(f.parts) == len(PurePosixPath(glob).parts)
                                             for glob in globs)] == []


# -- the loader ------------------------------------------------------------------------------------


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


def test_a_name_the_file_lacks_is_a_key_error_that_names_the_file() -> None:
    with pytest.raises(KeyError, match=r"reversi/store/jobs.sql has no statement named 'get_jobs'"):
        load("jobs.sql")["get_jobs"]


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
