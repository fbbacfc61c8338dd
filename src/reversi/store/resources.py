"""The queries of the resources steps touched (`step_resources`): `ResourceQueries`, part of every
transaction's `Queries`; their SQL is in `resources.sql`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from reversi.core.resources import Touch
from reversi.store.sql import fill, load, marks
from reversi.store.statements import CHUNK, Statements

_SQL = load("resources.sql")


class ResourceQueries(Statements):
    """The queries of the resources steps touched (`step_resources`)."""

    def add_touches(self, run_id: str, step: int, at: str, keys: Iterable[str]) -> None:
        """Record that a step touched the resources `keys` (keyed hashes), its outcome journaled `at`."""
        wanted = sorted(set(keys))
        for start in range(0, len(wanted), CHUNK // 4):
            chunk = wanted[start : start + CHUNK // 4]
            self._exec(fill(_SQL["add_touches"], rows=marks(len(chunk), _SQL["touch_row"])),
                       [v for key in chunk for v in (key, run_id, step, at)])

    def run_touches(self, run_ids: Sequence[str]) -> list[Touch]:
        """Every touch of the steps of these runs."""
        found: list[Touch] = []
        for start in range(0, len(run_ids), CHUNK):
            ids = run_ids[start : start + CHUNK]
            found += [Touch(row[3], row[1], row[2], row[0]) for row in self._exec(
                fill(_SQL["run_touches"], runs=marks(len(ids))), ids).fetchall()]
        return found

    def touches_of(self, keys: Iterable[str]) -> list[Touch]:
        """Every touch of these resources, by any step of any run."""
        wanted = sorted(set(keys))
        found: list[Touch] = []
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            found += [Touch(row[3], row[1], row[2], row[0]) for row in self._exec(
                fill(_SQL["touches_of"], resources=marks(len(chunk))), chunk).fetchall()]
        return found
