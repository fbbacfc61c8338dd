"""The queries of API keys (`api_keys`): `KeyQueries`, part of every transaction's `Queries`; their SQL is
in `keys.sql`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reversi.core.json_values import JSONObject
from reversi.store.sql import fill, load, optional
from reversi.store.statements import Statements

_SQL = load("keys.sql")


@dataclass(frozen=True)
class KeyRow:
    key_id: str
    name: str
    role: str
    tenant: str | None
    secret_sha256: str
    created_at: str
    revoked_at: str | None
    created_by: str | None = None  # the principals that created and revoked it (None: before 0009)
    revoked_by: str | None = None

    def to_dict(self) -> JSONObject:
        """The key as listed: never its secret or hash."""
        return {"id": self.key_id, "name": self.name, "role": self.role, "tenant": self.tenant,
                "created_at": self.created_at, "revoked_at": self.revoked_at, "created_by": self.created_by,
                "revoked_by": self.revoked_by}


class KeyQueries(Statements):
    """The queries of API keys (`api_keys`)."""

    def insert_key(self, row: KeyRow) -> None:
        self._exec(_SQL["insert_key"],
                   (row.key_id, row.name, row.role, row.tenant, row.secret_sha256, row.created_at, row.revoked_at,
                    row.created_by, row.revoked_by))

    def get_key(self, key_id: str) -> KeyRow | None:
        row = self._exec(_SQL["get_key"], (key_id,)).fetchone()
        return KeyRow(*row) if row else None

    def list_keys(self, tenant: str | None = None) -> list[KeyRow]:
        """Every key, or (with `tenant`) the keys of that tenant, oldest first."""
        params: list[Any] = []
        sql = fill(_SQL["list_keys"], of_tenant=optional(_SQL["keys_of_tenant"], params, tenant))
        rows = self._exec(sql, params).fetchall()
        return [KeyRow(*r) for r in rows]

    def revoke_key(self, key_id: str, at: str, by: str | None = None) -> None:
        self._exec(_SQL["revoke_key"], (at, by, key_id))

    def any_key(self) -> bool:
        """Whether the store holds any key, revoked or not."""
        return self._exec(_SQL["any_key"]).fetchone() is not None

    def keys_named(self, name: str) -> list[KeyRow]:
        return [KeyRow(*r) for r in self._exec(_SQL["keys_named"], (name,)).fetchall()]

    def key_is_active(self, key_id: str) -> bool:
        row = self._exec(_SQL["key_is_active"], (key_id,)).fetchone()
        return row is not None
