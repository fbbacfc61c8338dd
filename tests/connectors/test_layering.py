"""The connectors stand on `reversi.core` (and the error tree) only, and export a sorted surface."""

from __future__ import annotations

import ast
from pathlib import Path

import reversi.connectors

PACKAGE = Path(reversi.connectors.__file__).parent
FORBIDDEN = ("reversi.engine", "reversi.store", "reversi.server", "reversi.gateway", "reversi.cli", "reversi.demo")


def test_no_connector_module_imports_the_engine_the_store_or_a_surface() -> None:
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert not name.startswith(FORBIDDEN), f"{path.name} imports {name}"


def test_the_public_surface_is_sorted_and_importable() -> None:
    assert reversi.connectors.__all__ == sorted(reversi.connectors.__all__, key=lambda n: (not n.isupper(), n))
    for name in reversi.connectors.__all__:
        assert getattr(reversi.connectors, name) is not None
