"""The SQL of the resources steps touched (`step_resources`): `ResourceQueries`, part of every
transaction's `Queries`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from reversi.core.resources import Touch
from reversi.store.statements import CHUNK, Statements


class ResourceQueries(Statements):
    """The SQL of the resources steps touched (`step_resources`)."""

    def add_touches(self, run_id: str, step: int, at: str, keys: Iterable[str]) -> None:
        """Record that a step touched the resources `keys` (keyed hashes), its outcome journaled `at`."""
        wanted = sorted(set(keys))
        for start in range(0, len(wanted), CHUNK // 4):
            chunk = wanted[start : start + CHUNK // 4]
            values = ", ".join("(?, ?, ?, ?)" for _ in chunk)
            self._exec(f"INSERT INTO step_resources (resource, run_id, step, at) VALUES {values} "
                       "ON CONFLICT (resource, run_id, step) DO NOTHING",
                       [v for key in chunk for v in (key, run_id, step, at)])

    def run_touches(self, run_ids: Sequence[str]) -> list[Touch]:
        """Every touch of the steps of these runs."""
        found: list[Touch] = []
        for start in range(0, len(run_ids), CHUNK):
            ids = run_ids[start : start + CHUNK]
            marks = ", ".join("?" for _ in ids)
            found += [Touch(row[3], row[1], row[2], row[0]) for row in self._exec(
                f"SELECT resource, run_id, step, at FROM step_resources WHERE run_id IN ({marks})", ids).fetchall()]
        return found

    def touches_of(self, keys: Iterable[str]) -> list[Touch]:
        """Every touch of these resources, by any step of any run."""
        wanted = sorted(set(keys))
        found: list[Touch] = []
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            marks = ", ".join("?" for _ in chunk)
            found += [Touch(row[3], row[1], row[2], row[0]) for row in self._exec(
                f"SELECT resource, run_id, step, at FROM step_resources WHERE resource IN ({marks})", chunk
            ).fetchall()]
        return found
