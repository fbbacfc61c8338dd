"""The store read as plain tables, for the witness and the checker: SQL on `events`, `steps` and
`rollback_jobs` through the database drivers, with none of the engine's code in between.

Each query runs in a transaction of its own (autocommit), so it sees what was committed when it ran.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

import psycopg


@dataclass(frozen=True)
class RawEvent:
    run_id: str
    seq: int
    step: int | None
    type: str
    at: str
    data: dict[str, Any]


_EVENTS = "SELECT run_id, seq, step, type, at, data FROM events"


class RawStore:
    """A read-only view of a Reversi store's tables, by URL (`sqlite:///PATH` or `postgresql://...`)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._sqlite = url.startswith("sqlite:///")
        if self._sqlite:
            self._conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None,
                                              check_same_thread=False, timeout=30)
        else:
            self._conn = psycopg.connect(url, autocommit=True)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RawStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if not self._sqlite:
            sql = sql.replace("?", "%s")
        return list(self._conn.execute(sql, params).fetchall())

    def _events(self, where: str = "", params: tuple[Any, ...] = ()) -> list[RawEvent]:
        rows = self._rows(f"{_EVENTS} {where} ORDER BY run_id, seq", params)
        return [RawEvent(r[0], int(r[1]), r[2], r[3], r[4], json.loads(r[5])) for r in rows]

    def events(self) -> list[RawEvent]:
        """Every run's events, each run in `seq` order."""
        return self._events()

    def intended_for(self, op: str) -> RawEvent | None:
        """The latest committed `intended` event of a call whose arguments carry `"op": op`, if any."""
        found = self._events("WHERE type = 'intended' AND data LIKE ?", (f"%{op}%",))
        return next((e for e in reversed(found) if (e.data.get("args") or {}).get("op") == op), None)

    def compensating_for(self, key: str) -> list[RawEvent]:
        """The committed `compensating` events that carry idempotency key `key`."""
        found = self._events("WHERE type = 'compensating' AND data LIKE ?", (f"%{key}%",))
        return [e for e in found if e.data.get("idempotency_key") == key]

    def steps(self) -> list[tuple[str, int, str]]:
        """Every step's (run_id, step, tool), from the `steps` table."""
        rows = self._rows("SELECT run_id, step, tool FROM steps ORDER BY run_id, step")
        return [(r[0], int(r[1]), r[2]) for r in rows]

    def run_ids(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT run_id FROM runs ORDER BY run_id")]

    def job_reports(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(job_id, state, report) of every rollback job that has a report, final or so far."""
        rows = self._rows("SELECT job_id, state, report FROM rollback_jobs WHERE report IS NOT NULL")
        return [(r[0], r[1], json.loads(r[2])) for r in rows]
