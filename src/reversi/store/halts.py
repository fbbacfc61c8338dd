"""The SQL of halts (the `system_events` stream of `halt_added` and `halt_lifted`): `HaltQueries`, part
of every transaction's `Queries`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reversi.core.json_values import compact as dumps
from reversi.core.models import Event, EventType, Halt, HaltScope, utc_now
from reversi.store.statements import Statements


class HaltQueries(Statements):
    """The SQL of the halts' stream: appended to under one lock, read as the halts in force."""

    def append_system(
        self, type_: EventType, actor: str, halt_id: str, data: Mapping[str, Any], tenant: str | None = None
    ) -> str:
        """Append to the halts' stream; `tenant` is a new halt's tenant scope ("" for every tenant)."""
        self.lock_name("system_events")
        row = self._exec("SELECT MAX(seq) FROM system_events").fetchone()
        seq = 0 if row[0] is None else int(row[0]) + 1
        at = utc_now()
        self._exec(
            "INSERT INTO system_events (seq, type, at, actor, halt_id, data, tenant) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (seq, type_.value, at, actor, halt_id, dumps(dict(data)), tenant),
        )
        return at

    def active_halts(self, *, lock_run: str | None = None, tenant: str | None = None) -> list[Halt]:
        """The halts in force (with `tenant`, those scoped to exactly that tenant); with `lock_run`,
        also take that run's write lock (`lock_run()`)."""
        prefix, guard, params = self._run_guard(lock_run)
        of_tenant = " AND (a.tenant = ? OR a.tenant IS NULL)" if tenant is not None else ""
        rows = self._exec(
            f"{prefix}SELECT a.halt_id, a.actor, a.at, a.data, a.tenant FROM system_events a "
            f"WHERE a.type = 'halt_added'{of_tenant} AND NOT EXISTS (SELECT 1 FROM system_events b "
            f"WHERE b.type = 'halt_lifted' AND b.halt_id = a.halt_id){guard} ORDER BY a.seq",
            (*params, *([tenant] if tenant is not None else [])),
        ).fetchall()
        halts = []
        for halt_id, by, at, data, column in rows:
            d = json.loads(data)
            halt = Halt(halt_id, d["reason"], HaltScope(**d.get("scope", {})), by, at, d.get("principal"))
            if column is not None or tenant is None or halt.scope.tenant == tenant:  # NULL: added before 0005
                halts.append(halt)
        return halts

    def system_events(self, since: str | None = None) -> list[Event]:
        sql = "SELECT seq, type, at, actor, halt_id, data FROM system_events"
        params: list[Any] = []
        if since is not None:
            sql += " WHERE at >= ?"
            params.append(since)
        rows = self._exec(sql + " ORDER BY seq", params).fetchall()
        return [Event(None, r[0], None, r[1], r[2], r[3], {"halt_id": r[4], **json.loads(r[5])}) for r in rows]
