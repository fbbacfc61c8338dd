"""Journaling cost: `run.call(tool, args, noop)` against bare commits of the same rows.

Durability `full` (the default): per call the baseline writes, on a scratch database with the same
schema and pragmas, the step row and its `intended` event in one committed transaction, calls the
same no-op, and writes the `succeeded` event in a second committed transaction: the floor any
journal-before, journal-after design pays. Durability `intent`: ONE committed transaction per call,
holding the previous call's `succeeded`, the step row and its `intended`, then the no-op: the floor
of a journal that waits only for `intended`. Batches of the two alternate, so drift in the disk or
the server hits both alike.

    python bench/journal.py [--quick]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` importable, and not bench/ itself
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
from collections.abc import Callable
from typing import Any

import reversi
from bench.common import (
    Result,
    median,
    ms,
    note,
    percentile,
    pg_schemas,
    pg_unreachable,
    pg_url,
    print_table,
    rate,
    raw_pg,
    raw_sqlite,
    temp_dir,
    timed_calls,
    write_manifest,
)
from reversi.core.json_values import JSONObjectView
from reversi.core.json_values import compact as dumps
from reversi.core.models import utc_now

TOOL = "inventory.reserve"
MANIFEST = """\
version: 1
tools:
  inventory.reserve:
    compensation:
      tool: inventory.release
      args: {reservation: "$result.id", sku: "$args.sku"}
"""
ACTOR = "bench-agent"
MEDIAN_TARGET = 1.5
INTENT_MEDIAN_TARGET = 1.2
SQLITE_RATE_TARGET = 1_000


def noop(**kwargs: Any) -> dict[str, Any]:
    return {"id": "res_1", "ok": True}


def call_args(i: int) -> dict[str, Any]:
    return {"sku": "sku-4711", "qty": i % 7 + 1}


class _Baseline:
    """Writes exactly the rows `run.call` writes, with nothing else around them."""

    def __init__(self, digest: str, run_id: str = "run_baseline") -> None:
        self.digest = digest
        self.run_id = run_id
        self.step = 0
        self.seq = 0
        self.last: tuple[Any, ...] | None = None  # the outcome not written yet (the intent floor)

    def rows(self, args: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        step_row = (self.run_id, self.step, TOOL, dumps(args), "[]", 0, self.digest, None)
        intended: JSONObjectView = {"tool": TOOL, "args": args, "depends_on": [], "manifested": True}
        event = (self.run_id, self.seq, self.step, "intended", utc_now(), ACTOR, dumps(intended), None)
        return step_row, event

    def outcome(self, result: Any) -> tuple[Any, ...]:
        return (self.run_id, self.seq + 1, self.step, "succeeded", utc_now(), ACTOR, dumps({"result": result}), None)

    def opened(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        run = (self.run_id, "local", "observe", ACTOR, "", "", "{}", utc_now())
        event = (self.run_id, 0, None, "run_opened", utc_now(), ACTOR, "{}", None)
        self.seq = 1
        return run, event


_INSERT_RUN = "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_STEP = "INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_EVENT = "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)"


class SQLiteBaseline(_Baseline):
    def __init__(self, path: Path, digest: str) -> None:
        super().__init__(digest)
        self.conn = raw_sqlite(path)
        run, event = self.opened()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(_INSERT_RUN, run)
        self.conn.execute(_INSERT_EVENT, event)
        self.conn.execute("COMMIT")

    def call(self, i: int) -> None:
        c = self.conn
        args = call_args(i)
        step_row, intended = self.rows(args)
        c.execute("BEGIN IMMEDIATE")
        c.execute(_INSERT_STEP, step_row)
        c.execute(_INSERT_EVENT, intended)
        c.execute("COMMIT")
        result = noop(**args)
        c.execute("BEGIN IMMEDIATE")
        c.execute(_INSERT_EVENT, self.outcome(result))
        c.execute("COMMIT")
        self.step += 1
        self.seq += 2

    def call_one_commit(self, i: int) -> None:
        """The intent floor: the previous outcome rides on this call's one commit."""
        c = self.conn
        args = call_args(i)
        c.execute("BEGIN IMMEDIATE")
        if self.last is not None:
            c.execute(_INSERT_EVENT, self.last)
            self.seq += 1
        step_row, intended = self.rows(args)
        c.execute(_INSERT_STEP, step_row)
        c.execute(_INSERT_EVENT, intended)
        c.execute("COMMIT")
        self.last = self.outcome(noop(**args))
        self.step += 1
        self.seq += 1

    def close(self) -> None:
        self.conn.close()


class PostgresBaseline(_Baseline):
    """`conn`: a connection to a database that has the schema (else one is made at `url`, with it)."""

    def __init__(self, url: str, digest: str, run_id: str = "run_baseline", conn: Any = None) -> None:
        super().__init__(digest, run_id)
        self.conn = conn or raw_pg(url)
        self.cur = self.conn.cursor()
        run, event = self.opened()
        with self.conn.transaction():
            self.cur.execute(_INSERT_RUN.replace("?", "%s"), run)
            self.cur.execute(_INSERT_EVENT.replace("?", "%s"), event)

    def call(self, i: int) -> None:
        cur = self.cur
        args = call_args(i)
        step_row, intended = self.rows(args)
        with self.conn.transaction():
            cur.execute(_INSERT_STEP.replace("?", "%s"), step_row)
            cur.execute(_INSERT_EVENT.replace("?", "%s"), intended)
        result = noop(**args)
        with self.conn.transaction():
            cur.execute(_INSERT_EVENT.replace("?", "%s"), self.outcome(result))
        self.step += 1
        self.seq += 2

    def call_one_commit(self, i: int) -> None:
        """The intent floor: the previous outcome rides on this call's one commit."""
        cur = self.cur
        args = call_args(i)
        with self.conn.transaction():
            if self.last is not None:
                cur.execute(_INSERT_EVENT.replace("?", "%s"), self.last)
                self.seq += 1
            step_row, intended = self.rows(args)
            cur.execute(_INSERT_STEP.replace("?", "%s"), step_row)
            cur.execute(_INSERT_EVENT.replace("?", "%s"), intended)
        self.last = self.outcome(noop(**args))
        self.step += 1
        self.seq += 1

    def close(self) -> None:
        self.conn.close()


def compare(
    name: str, journaled: Callable[[int], Any], bare: Callable[[int], Any], warmup: int, rounds: int, batch: int
) -> tuple[list[float], float, list[float], float]:
    """Alternate batches of the two; every call's seconds and the total wall time of each side."""
    timed_calls(journaled, 0, warmup)
    timed_calls(bare, 0, warmup)
    samples: dict[str, list[float]] = {"r": [], "b": []}
    walls = {"r": 0.0, "b": 0.0}
    sides = {"r": journaled, "b": bare}
    start = warmup
    for r in range(rounds):
        for side in ("r", "b") if r % 2 == 0 else ("b", "r"):
            got, wall = timed_calls(sides[side], start, batch)
            samples[side] += got
            walls[side] += wall
        start += batch
    note(f"{name}: {rounds} alternating rounds of {batch} calls each side (after {warmup} warm-up calls)")
    return samples["r"], walls["r"], samples["b"], walls["b"]


def results(
    name: str, measured: tuple[list[float], float, list[float], float], rate_target: int | None,
    median_target: float = MEDIAN_TARGET,
) -> list[Result]:
    rev, rev_wall, base, base_wall = measured
    rev_med, base_med = median(rev), median(base)
    rev_p99, base_p99 = percentile(rev, 0.99), percentile(base, 0.99)
    rev_rate, base_rate = len(rev) / rev_wall, len(base) / base_wall
    ratio = rev_med / base_med
    return [
        Result(
            name,
            "median per call",
            ms(rev_med),
            ms(base_med),
            ratio,
            f"ratio <= {median_target}",
            ratio <= median_target,
        ),
        Result(name, "p99 per call", ms(rev_p99), ms(base_p99), rev_p99 / base_p99),
        Result(
            name,
            "throughput, one process",
            rate(rev_rate, "calls"),
            rate(base_rate, "calls"),
            base_rate / rev_rate,
            f">= {rate_target:,} calls/s" if rate_target else "",
            rev_rate >= rate_target if rate_target else None,
        ),
    ]


def _measure(name: str, ledger_url: str, manifest: str, make_baseline: Callable[[str], Any],
             sizes: tuple[int, int, int], durability: str = "full") -> Any:
    """Journal `run.call` of a no-op against `ledger_url`, beside the baseline's bare commits (one a
    call for durability `intent`, else two)."""
    warmup, rounds, batch = sizes
    with reversi.open(ledger_url, manifests=[manifest], durability=durability) as ledger:
        entry = ledger.manifests.lookup(TOOL)
        assert entry is not None
        base = make_baseline(entry.digest)
        bare = base.call_one_commit if durability == "intent" else base.call
        run = ledger.start_run(actor=ACTOR)
        try:
            measured = compare(name, lambda i: run.call(TOOL, call_args(i), noop), bare, warmup, rounds, batch)
        finally:
            base.close()
        steps = run.steps()  # a read: it waits for the outcomes still deferred
        assert len(steps) == warmup + rounds * batch
        assert all(s.status.value == "succeeded" for s in steps)
    return measured


def bench_sqlite(quick: bool = False) -> list[Result]:
    sizes = (100, 4, 250) if quick else (200, 6, 500)
    found = []
    for durability, name, target in (("full", "journal/sqlite", MEDIAN_TARGET),
                                     ("intent", "journal/sqlite intent", INTENT_MEDIAN_TARGET)):
        with temp_dir("journal") as d:
            manifest = write_manifest(d, MANIFEST)
            measured = _measure(name, f"sqlite:///{d / 'reversi.db'}", manifest,
                                lambda digest: SQLiteBaseline(d / "baseline.db", digest), sizes, durability)
        found += results(name, measured, SQLITE_RATE_TARGET, target)
    return found


def bench_postgres(quick: bool = False) -> list[Result]:
    url = pg_url()
    why = pg_unreachable(url)
    if why is not None:
        note(f"journal/postgres: skipped, PostgreSQL unreachable ({why})")
        return [Result("journal/postgres", "skipped", f"PostgreSQL unreachable: {why}")]
    assert url is not None
    sizes = (50, 4, 100) if quick else (100, 6, 250)
    found = []
    for durability, name, target in (("full", "journal/postgres", MEDIAN_TARGET),
                                     ("intent", "journal/postgres intent", INTENT_MEDIAN_TARGET)):
        with temp_dir("journal-pg") as d, pg_schemas(url, "ledger", "baseline") as ((_, ledger_url), (_, base_url)):
            manifest = write_manifest(d, MANIFEST)
            measured = _measure(name, ledger_url, manifest,
                                lambda digest: PostgresBaseline(base_url, digest), sizes,
                                durability)
        found += results(name, measured, None, target)
    return found


def bench(quick: bool = False) -> list[Result]:
    return bench_sqlite(quick) + bench_postgres(quick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, for a smoke test")
    args = parser.parse_args(argv)
    print_table(bench(args.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
