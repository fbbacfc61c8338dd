"""The queries of drills (`drills`): `DrillQueries`, part of every transaction's `Queries`; their SQL is in
`drills.sql`."""

from __future__ import annotations

import json
from typing import Any

from reversi.core.drill import Drill, Verdict
from reversi.core.json_values import compact as dumps
from reversi.store.sql import fill, load, optional
from reversi.store.statements import LIMIT, Statements

_SQL = load("drills.sql")


class DrillQueries(Statements):
    """The queries of drills: each one's evidence, kept whole, looked up by tool and server."""

    def insert_drill(self, drill: Drill) -> None:
        self._exec(
            _SQL["insert_drill"],
            (drill.drill_id, drill.tool, drill.server, drill.version, drill.verdict.value, drill.at,
             dumps(drill.evidence)),
        )

    def drills(self, tool: str | None = None, server: str | None = None, limit: int | None = None) -> list[Drill]:
        """Drills newest first, of `tool` and of `server` (its name) when given."""
        params: list[Any] = []
        sql = fill(_SQL["drills"], of_tool=optional(_SQL["drills_of_tool"], params, tool),
                   of_server=optional(_SQL["drills_of_server"], params, server), limit=optional(LIMIT, params, limit))
        return [_drill(row) for row in self._exec(sql, params).fetchall()]


def _drill(row: Any) -> Drill:
    return Drill(row[0], row[1], row[2], row[3], Verdict(row[4]), row[5], json.loads(row[6]))
