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
