"""The SQL of the store's own secrets (`store_secrets`): `SecretQueries`, part of every transaction's `Queries`."""

from __future__ import annotations

from reversi.store.statements import Statements


class SecretQueries(Statements):
    """The SQL of the store's own secrets (`store_secrets`)."""

    def read_secret(self, name: str) -> str | None:
        """The secret called `name`, if the store has made it."""
        row = self._exec("SELECT value FROM store_secrets WHERE name = ?", (name,)).fetchone()
        return str(row[0]) if row else None

    def store_secret(self, name: str, made: str, now: str) -> str:
        """The secret called `name`: `made` if there was none (whoever inserts first wins a race)."""
        self._exec("INSERT INTO store_secrets (name, value, created_at) VALUES (?, ?, ?) "
                   "ON CONFLICT (name) DO NOTHING", (name, made, now))
        row = self._exec("SELECT value FROM store_secrets WHERE name = ?", (name,)).fetchone()
        return str(row[0])
