"""The layers keep to their side: core and engine speak of values and settings, never of a surface's
flags (the CLI adds its own wording where it renders them)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "reversi"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")
# Being rewritten by the lead engineer; its message is listed for that rewrite.
PENDING = {"engine/rollback.py"}


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
        if where in PENDING:
            continue
        tree = ast.parse(path.read_text())
        skip = docstrings(tree)
        found += [f"{where}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                  and FLAG.search(node.value)]
    assert found == []


# Where the ledger's time form and compact JSON are made; engine/remote.py (being rewritten) still
# formats its own lease expiry.
ONE_PLACE = {'.replace("+00:00", "Z")': {"core/times.py", "engine/remote.py"},
             'separators=(",", ":")': {"core/json_values.py"}}


def test_times_are_formatted_and_json_is_compacted_in_one_place_each() -> None:
    found = {pattern: set() for pattern in ONE_PLACE}
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        for pattern, places in found.items():
            if pattern in text:
                places.add(path.relative_to(SRC).as_posix())
    assert found == ONE_PLACE
