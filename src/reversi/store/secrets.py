"""The queries of the store's own secrets (`store_secrets`): `SecretQueries`, part of every transaction's
`Queries`; their SQL is in `secrets.sql`."""

from __future__ import annotations

from reversi.store.sql import load
from reversi.store.statements import Statements

_SQL = load("secrets.sql")


class SecretQueries(Statements):
    """The queries of the store's own secrets (`store_secrets`)."""

    def read_secret(self, name: str) -> str | None:
        """The secret called `name`, if the store has made it."""
        row = self._exec(_SQL["read_secret"], (name,)).fetchone()
        return str(row[0]) if row else None

    def store_secret(self, name: str, made: str, now: str) -> str:
        """The secret called `name`: `made` if there was none (whoever inserts first wins a race)."""
        self._exec(_SQL["insert_secret"], (name, made, now))
        row = self._exec(_SQL["read_secret"], (name,)).fetchone()
        return str(row[0])
