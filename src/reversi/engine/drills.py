"""Drill evidence in the store: recorded by `reversi manifest drill`, read by `reversi manifest coverage`."""

from __future__ import annotations

from reversi.core.drill import Drill
from reversi.store.base import Store


def record_drill(store: Store, drill: Drill) -> None:
    """Keep one drill's evidence."""
    with store.write() as q:
        q.insert_drill(drill)


def list_drills(store: Store, tool: str | None = None, server: str | None = None,
                limit: int | None = None) -> list[Drill]:
    """Drills newest first, of `tool` and of `server` (its name) when given."""
    with store.read() as q:
        return q.drills(tool, server, limit)
