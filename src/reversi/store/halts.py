"""The queries of halts (the `system_events` stream of `halt_added` and `halt_lifted`): `HaltQueries`, part
of every transaction's `Queries`; their SQL is in `halts.sql`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reversi.core.json_values import LooseJSON
from reversi.core.json_values import compact as dumps
from reversi.core.models import Event, EventType, Halt, HaltScope, utc_now
from reversi.store.sql import fill, load, optional
from reversi.store.statements import Statements, guarded

_SQL = load("halts.sql")
# by whether they are asked for a tenant's halts
_ACTIVE_HALTS = {of_tenant: guarded(_SQL["active_halts"], of_tenant=_SQL["halts_of_tenant"] if of_tenant else "")
                 for of_tenant in (False, True)}


class HaltQueries(Statements):
    """The queries of the halts' stream: appended to under one lock, read as the halts in force."""

    def append_system(
        self, type_: EventType, actor: str, halt_id: str, data: Mapping[str, LooseJSON], tenant: str | None = None
    ) -> str:
        """Append to the halts' stream; `tenant` is a new halt's tenant scope ("" for every tenant)."""
        self.lock_name("system_events")
        row = self._exec(_SQL["last_system_seq"]).fetchone()
        seq = 0 if row[0] is None else int(row[0]) + 1
        at = utc_now()
        self._exec(
            _SQL["insert_system_event"],
            (seq, type_.value, at, actor, halt_id, dumps(dict(data)), tenant),
        )
        return at

    def active_halts(self, *, lock_run: str | None = None, tenant: str | None = None) -> list[Halt]:
        """The halts in force (with `tenant`, those scoped to exactly that tenant); with `lock_run`,
        also take that run's write lock (`lock_run()`)."""
        sql, lock = self._guarded(_ACTIVE_HALTS[tenant is not None], lock_run)
        rows = self._exec(sql, (*lock, *([tenant] if tenant is not None else []))).fetchall()
        halts = []
        for halt_id, by, at, data, column in rows:
            d = json.loads(data)
            halt = Halt(halt_id, d["reason"], HaltScope(**d.get("scope", {})), by, at, d.get("principal"))
            if column is not None or tenant is None or halt.scope.tenant == tenant:  # NULL: added before 0005
                halts.append(halt)
        return halts

    def system_events(self, since: str | None = None) -> list[Event]:
        params: list[Any] = []
        sql = fill(_SQL["system_events"], since=optional(_SQL["system_events_since"], params, since))
        rows = self._exec(sql, params).fetchall()
        return [Event(None, r[0], None, r[1], r[2], r[3], {"halt_id": r[4], **json.loads(r[5])}) for r in rows]
