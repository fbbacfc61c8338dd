"""A SQLite ledger under the suite's manifest for the framework tests (the store is not what they test).

The tests of a framework that cannot be installed here are not collected: test_in_own_env.py runs them
in a virtualenv of their own (own_env.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integrations.own_env import OWN_ENVS

import reversi

collect_ignore = [env.tests for env in OWN_ENVS if not env.installed_here()]


@pytest.fixture
def sqlite_ledger(tmp_path: Path, manifest: Path) -> Iterator[reversi.Ledger]:
    with reversi.open(f"sqlite:///{tmp_path / 'reversi.db'}", manifests=[str(manifest)]) as ledger:
        yield ledger


def refund(call: dict[str, object]) -> dict[str, object]:
    """A compensator that only answers: what the tests roll back needs nothing real undone."""
    return {"refunded": call["args"]}
