"""A 10,000-step rollback with an in-process compensator, after recording the run with the SDK.

Recording (`run.call` per step) and rolling back (`run.rollback(compensate=...)`) are timed apart.
The baseline is the floor of the rollback's journaling: per step, the `compensating` event in one
committed transaction and the `compensated` event in a second, on a copy of the recorded ledger
(same schema, rows and pragmas), half of it just before the rollback and half just after, so both
see the same disk. It runs 4,000 steps; the two are compared per step (target: the rollback at
least 0.75x the floor's rate on SQLite, 0.6x on PostgreSQL).

    python bench/rollback.py [--quick] [--pg-steps N]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` importable, and not bench/ itself
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import abc
import argparse
import gc
import sqlite3
import time
from collections.abc import Callable
from typing import Any

import reversi
from bench.common import (
    Result,
    note,
    pg_schemas,
    pg_unreachable,
    pg_url,
    print_table,
    rate,
    raw_pg,
    temp_dir,
    timed,
    with_search_path,
    write_manifest,
)
from reversi.core.json_values import JSONObjectView
from reversi.core.json_values import compact as dumps
from reversi.core.models import utc_now
from reversi.core.plan import compensation_key

STEPS = 10_000
BASELINE_STEPS = 4_000  # floor steps, half before and half after the rollback
RATE_TARGET = 1_000  # steps/s, SQLite
# The rollback's rate as a share of its journaling floor's, at least (SQLite, PostgreSQL).
FLOOR_SHARE_SQLITE, FLOOR_SHARE_POSTGRES = 0.75, 0.6
TOOL = "inventory.reserve"
UNDO = "inventory.release"
MANIFEST = """\
version: 1
tools:
  inventory.reserve:
    compensation:
      tool: inventory.release
      args: {reservation: "$result.id", sku: "$args.sku"}
"""


def reserve(sku: str, qty: int) -> dict[str, Any]:
    return {"id": f"res_{sku}_{qty}", "ok": True}


def compensate(call: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


def record(run: reversi.Run, steps: int) -> None:
    for i in range(steps):
        run.call(TOOL, {"sku": f"sku-{i}", "qty": i % 7 + 1}, reserve)


class Floor(abc.ABC):
    """The rollback's journaling with nothing around it, on a copy of the recorded ledger.

    Per step, newest first: the `compensating` event in one committed transaction, the no-op
    compensator, the `compensated` event in a second committed transaction.
    """

    def __init__(self, run_id: str, steps: int, first_seq: int) -> None:
        self.run_id = run_id
        self.pending = list(reversed(range(steps)))
        self.seq = first_seq

    def rows(self, step: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        key = compensation_key(self.run_id, step, UNDO)
        args = {"reservation": f"res_sku-{step}_{step % 7 + 1}", "sku": f"sku-{step}"}
        begin: JSONObjectView = {"tool": UNDO, "args": args, "idempotency_key": key, "attempt": 1}
        done: JSONObjectView = {"result": {"ok": True}, "attempts": 1}
        self.seq += 2
        return (
            (self.run_id, self.seq - 2, step, "compensating", utc_now(), "local", dumps(begin), None),
            (self.run_id, self.seq - 1, step, "compensated", utc_now(), "local", dumps(done), None),
        )

    def write(self, count: int) -> float:
        """Seconds to journal the next `count` steps."""
        todo, self.pending = self.pending[:count], self.pending[count:]
        gc.collect()
        t0 = time.perf_counter()
        for step in todo:
            begin, done = self.rows(step)
            self.commit(begin)
            compensate({})
            self.commit(done)
        return time.perf_counter() - t0

    @abc.abstractmethod
    def commit(self, row: tuple[Any, ...]) -> None:
        """Write one journal row in its own committed transaction."""


_INSERT_EVENT = "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)"


class SQLiteFloor(Floor):
    def __init__(self, ledger_path: Path, path: Path, run_id: str, steps: int) -> None:
        source = sqlite3.connect(ledger_path)
        self.conn = sqlite3.connect(path, isolation_level=None)
        source.backup(self.conn)
        source.close()
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        (last,) = self.conn.execute("SELECT MAX(seq) FROM events WHERE run_id = ?", (run_id,)).fetchone()
        super().__init__(run_id, steps, last + 1)

    def commit(self, row: tuple[Any, ...]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(_INSERT_EVENT, row)
        self.conn.execute("COMMIT")


class PostgresFloor(Floor):
    def __init__(self, url: str, schemas: tuple[str, str], run_id: str, steps: int) -> None:
        import psycopg

        ledger, base = schemas
        raw_pg(with_search_path(url, base)).close()
        with psycopg.connect(url, autocommit=True) as admin:
            for table in ("runs", "steps", "events"):
                admin.execute(f'INSERT INTO "{base}".{table} SELECT * FROM "{ledger}".{table}')
            admin.execute(f'ANALYZE "{base}".events')
        self.conn = psycopg.connect(with_search_path(url, base), autocommit=True)
        self.cur = self.conn.cursor()
        row = self.cur.execute("SELECT MAX(seq) FROM events WHERE run_id = %s", (run_id,)).fetchone()
        assert row is not None
        super().__init__(run_id, steps, row[0] + 1)

    def commit(self, row: tuple[Any, ...]) -> None:
        with self.conn.transaction():
            self.cur.execute(_INSERT_EVENT.replace("?", "%s"), row)


def measure(
    name: str, db_url: str, manifest: str, steps: int, floor: Callable[[str], Floor], rate_target: int | None,
    floor_share: float,
) -> list[Result]:
    """Record, then time the rollback between two halves of the floor's run on a copy of the ledger."""
    with reversi.open(db_url, manifests=[manifest]) as ledger:
        run = ledger.start_run(actor="bench-agent")
        recording, _ = timed(lambda: record(run, steps))
        note(f"{name}: recorded {steps:,} steps with run.call in {recording:.1f} s")
        base = floor(run.id)
        base_steps = min(steps, BASELINE_STEPS)
        base_seconds = base.write(base_steps // 2)
        seconds, report = timed(lambda: run.rollback(compensate=compensate))
        base_seconds += base.write(base_steps - base_steps // 2)
        assert report.complete and len(report.compensated) == steps, report.to_dict()
    note(f"{name}: rolled back {steps:,} steps in {seconds:.1f} s; floor {base_steps:,} steps in {base_seconds:.1f} s")
    per_step, base_per_step = seconds / steps, base_seconds / base_steps
    rollback_rate = steps / seconds
    return [
        Result(name, f"record {steps // 1000}k steps (run.call)", rate(steps / recording, "steps")),
        Result(
            name,
            f"rollback {steps // 1000}k steps",
            rate(rollback_rate, "steps"),
            rate(1 / base_per_step, "steps"),
            per_step / base_per_step,
            f">= {rate_target:,} steps/s" if rate_target else "",
            rollback_rate >= rate_target if rate_target else None,
        ),
        Result(
            name,
            f"rollback {steps // 1000}k steps, time per step",
            f"{per_step * 1e6:,.0f} µs",
            f"{base_per_step * 1e6:,.0f} µs floor",
            per_step / base_per_step,
            f"ratio <= {1 / floor_share:.2f} (>= {floor_share:g}x the floor's rate)",
            per_step / base_per_step <= 1 / floor_share,
        ),
    ]


def bench_sqlite(quick: bool = False) -> list[Result]:
    steps = STEPS // 5 if quick else STEPS
    with temp_dir("rollback") as d:
        manifest = write_manifest(d, MANIFEST)
        return measure(
            "rollback/sqlite",
            f"sqlite:///{d / 'reversi.db'}",
            manifest,
            steps,
            lambda run_id: SQLiteFloor(d / "reversi.db", d / "baseline.db", run_id, steps),
            RATE_TARGET,
            FLOOR_SHARE_SQLITE,
        )


def bench_postgres(quick: bool = False, steps: int = STEPS) -> list[Result]:
    url = pg_url()
    why = pg_unreachable(url)
    if why is not None:
        note(f"rollback/postgres: skipped, PostgreSQL unreachable ({why})")
        return [Result("rollback/postgres", "skipped", f"PostgreSQL unreachable: {why}")]
    assert url is not None
    steps = steps // 5 if quick else steps
    with temp_dir("rollback-pg") as d, pg_schemas(url, "ledger", "baseline") as schemas:
        (ledger, ledger_url), (base, _) = schemas
        manifest = write_manifest(d, MANIFEST)

        def floor(run_id: str) -> Floor:
            return PostgresFloor(url, (ledger, base), run_id, steps)

        return measure("rollback/postgres", ledger_url, manifest, steps, floor, None, FLOOR_SHARE_POSTGRES)


def bench(quick: bool = False, pg_steps: int = STEPS) -> list[Result]:
    return bench_sqlite(quick) + bench_postgres(quick, pg_steps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a fifth of the steps, for a smoke test")
    parser.add_argument("--pg-steps", type=int, default=STEPS, help="steps of the PostgreSQL run (default 10,000)")
    args = parser.parse_args(argv)
    print_table(bench(args.quick, args.pg_steps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
