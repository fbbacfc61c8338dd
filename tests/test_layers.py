"""The layers keep to their side. The surfaces go through the Ledger: no CLI, server or gateway module
touches the store, or the ledger's store and recorder, behind its back (where the access policy would
be skipped). Core and engine speak of values and settings, never of a surface's flags (the CLI adds its
own wording where it renders them)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).parent.parent / "src" / "reversi"
SURFACES = ("cli", "server", "gateway")
BEHIND_THE_LEDGER = {"store", "recorder"}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


def reaches_behind_the_ledger(source: str) -> list[str]:
    """What a module's code does that only the engine may: import `reversi.store`, or name the
    `.store` or `.recorder` of an object (a ledger's, in practice)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.startswith("reversi.store")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.startswith("reversi.store") or (module == "reversi" and any(a.name == "store"
                                                                               for a in node.names)):
                found.append(f"from {module} import ...")
        elif isinstance(node, ast.Attribute) and node.attr in BEHIND_THE_LEDGER:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_no_surface_module_imports_the_store_or_names_a_ledgers_store_or_recorder() -> None:
    modules = [path for surface in SURFACES for path in sorted((SRC / surface).rglob("*.py"))]
    assert len(modules) > 20
    offending = {str(p.relative_to(SRC)): found for p in modules if (found := reaches_behind_the_ledger(p.read_text()))}
    assert offending == {}


def test_the_check_sees_each_way_of_reaching_behind_the_ledger() -> None:
    for source in ("import reversi.store.keys", "from reversi.store.base import Store", "from reversi import store",
                   "ledger.store.read()", "x = self.ledger.recorder", "server.ledger.store"):
        assert reaches_behind_the_ledger(source), source
    assert reaches_behind_the_ledger("ledger.for_principal(p).list_runs()\nfrom reversi.engine import access") == []


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_core_and_engine_messages_name_no_cli_flag() -> None:
    found = []
    for path in sorted([*(SRC / "core").rglob("*.py"), *(SRC / "engine").rglob("*.py")]):
        where = path.relative_to(SRC).as_posix()
        tree = ast.parse(path.read_text())
        skip = docstrings(tree)
        found += [f"{where}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                  and FLAG.search(node.value)]
    assert found == []


# Where the ledger's time form and compact JSON are made.
ONE_PLACE = {'.replace("+00:00", "Z")': {"core/times.py"},
             'separators=(",", ":")': {"core/json_values.py"}}


def test_times_are_formatted_and_json_is_compacted_in_one_place_each() -> None:
    found: dict[str, set[str]] = {pattern: set() for pattern in ONE_PLACE}
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        for pattern, places in found.items():
            if pattern in text:
                places.add(path.relative_to(SRC).as_posix())
    assert found == ONE_PLACE


# What the store's interface may not reach, even inside a function: a back end (which imports the interface)
# or the factory that picks one (which imports them).
BACK_ENDS = {"reversi.store.sqlite", "reversi.store.postgres", "reversi.store.factory", "sqlite3", "psycopg"}


def imported_modules(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return found


def test_the_store_interface_imports_no_back_end() -> None:
    imported = imported_modules((SRC / "store" / "base.py").read_text())

    assert {m for m in imported if m in BACK_ENDS or m.split(".")[0] in BACK_ENDS} == set()
    assert imported_modules("def f():\n    from reversi.store import sqlite\n") & BACK_ENDS
