"""The whole content of a store, as one value: a refused input must leave it exactly as it was."""

from __future__ import annotations

import hashlib

import reversi


def store_state(url: str) -> dict[str, str]:
    """Each table of the store (either back end), as a digest of all its rows in a fixed order."""
    with reversi.open(url) as ledger, ledger.store.read() as q:
        if url.startswith("sqlite:"):
            names = q.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
        else:
            names = q.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                              "ORDER BY tablename").fetchall()
        state = {}
        for (name,) in names:
            rows = q.execute(f'SELECT * FROM "{name}"').fetchall()
            state[name] = hashlib.sha256(repr(sorted(map(repr, rows))).encode()).hexdigest()
        return state
