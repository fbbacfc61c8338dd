"""The whole content of a store, as one value: a refused input must leave it exactly as it was."""

from __future__ import annotations

import hashlib
from contextlib import ExitStack

import reversi


def store_state(source: str | reversi.Ledger) -> dict[str, str]:
    """Each table of the store (either back end; its URL, or a ledger open on it), as a digest of all
    its rows in a fixed order."""
    with ExitStack() as stack:
        ledger = stack.enter_context(reversi.open(source)) if isinstance(source, str) else source
        q = stack.enter_context(ledger.store.read())
        if ledger.store.url.startswith("sqlite:"):
            names = q.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
        else:
            names = q.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                              "ORDER BY tablename").fetchall()
        state = {}
        for (name,) in names:
            rows = q.execute(f'SELECT * FROM "{name}"').fetchall()
            state[name] = hashlib.sha256(repr(sorted(map(repr, rows))).encode()).hexdigest()
        return state
