"""A SQLite ledger under the suite's manifest for the framework tests (the store is not what they test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import reversi


@pytest.fixture
def sqlite_ledger(tmp_path: Path, manifest: Path) -> Iterator[reversi.Ledger]:
    with reversi.open(f"sqlite:///{tmp_path / 'reversi.db'}", manifests=[str(manifest)]) as ledger:
        yield ledger


def refund(call: dict[str, object]) -> dict[str, object]:
    """A compensator that only answers: what the tests roll back needs nothing real undone."""
    return {"refunded": call["args"]}
