"""The SQL of drills (`drills`): `DrillQueries`, part of every transaction's `Queries`."""

from __future__ import annotations

import json
from typing import Any

from reversi.core.drill import Drill, Verdict
from reversi.core.json_values import compact as dumps
from reversi.store.statements import Statements

_COLUMNS = "drill_id, tool, server_name, server_version, verdict, at, evidence"


class DrillQueries(Statements):
    """The SQL of drills: each one's evidence, kept whole, looked up by tool and server."""

    def insert_drill(self, drill: Drill) -> None:
        self._exec(
            f"INSERT INTO drills ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (drill.drill_id, drill.tool, drill.server, drill.version, drill.verdict.value, drill.at,
             dumps(drill.evidence)),
        )

    def drills(self, tool: str | None = None, server: str | None = None, limit: int | None = None) -> list[Drill]:
        """Drills newest first, of `tool` and of `server` (its name) when given."""
        sql, params = f"SELECT {_COLUMNS} FROM drills WHERE 1 = 1", list[Any]()
        for column, value in (("tool", tool), ("server_name", server)):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        sql += " ORDER BY at DESC, drill_id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_drill(row) for row in self._exec(sql, params).fetchall()]


def _drill(row: Any) -> Drill:
    return Drill(row[0], row[1], row[2], row[3], Verdict(row[4]), row[5], json.loads(row[6]))
