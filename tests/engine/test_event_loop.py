"""An async rollback never blocks its event loop, even while another writer holds the store's lock.

A loop-tick monitor runs beside `await run.arollback()` while a second connection (not ours) holds
the lock every journal write of that run needs: SQLite's write lock, PostgreSQL's row lock on the
run. The rollback has to wait for it; the loop must not.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

import reversi

HOLD_S = 1.0
TICK_S = 0.01
MAX_STALL_S = 0.25


@contextmanager
def lock_held_elsewhere(db_url: str, run_id: str, released: threading.Event, hold_s: float = HOLD_S) -> Iterator[None]:
    """Hold, from another connection and thread, the lock `run_id`'s journal writes need, for `hold_s`
    or until `released`."""
    holding = threading.Event()

    def hold() -> None:
        if db_url.startswith("sqlite:///"):
            lite = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
            lite.execute("BEGIN IMMEDIATE")
            holding.set()
            released.wait(hold_s)
            lite.execute("ROLLBACK")
            lite.close()
        else:
            with psycopg.connect(db_url) as conn:
                conn.execute("SELECT 1 FROM runs WHERE run_id = %s FOR UPDATE", (run_id,))
                holding.set()
                released.wait(hold_s)
                conn.rollback()

    thread = threading.Thread(target=hold)
    thread.start()
    holding.wait(10)
    try:
        yield
    finally:
        released.set()
        thread.join()


async def longest_stall(stop: asyncio.Event) -> float:
    """The longest time the loop took to come back to a task that asked to sleep TICK_S."""
    loop = asyncio.get_running_loop()
    worst = 0.0
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(TICK_S)
        worst = max(worst, loop.time() - before - TICK_S)
    return worst


def test_an_async_rollback_keeps_the_loop_ticking_while_another_writer_holds_the_lock(
    db_url: str, tmp_path: Path
) -> None:
    with reversi.open(db_url) as ledger:
        run = ledger.start_run()
        for amount in (100, 200, 300):
            run.begin("stripe.create_charge", {"amount": amount}).succeeded({"id": f"ch_{amount}"})

    manifest = tmp_path / "tools.yaml"
    undo = {"compensation": {"tool": "stripe.refund", "args": {"id": "$result.id"}}}
    manifest.write_text(json.dumps({"version": 1, "tools": {"stripe.create_charge": undo}}))  # JSON is YAML
    undone: list[int] = []

    async def compensate(call: dict[str, Any]) -> dict[str, Any]:
        undone.append(call["step"])
        return {"refunded": True}

    async def scenario(ledger: reversi.Ledger) -> tuple[reversi.RollbackReport, float, float]:
        stop = asyncio.Event()
        monitor = asyncio.create_task(longest_stall(stop))
        await asyncio.sleep(TICK_S * 5)  # the monitor is ticking before the rollback starts
        started = time.monotonic()
        report = await ledger.get_run(run.id).arollback(compensate)
        took = time.monotonic() - started
        stop.set()
        return report, took, await monitor

    released = threading.Event()
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger, lock_held_elsewhere(db_url, run.id, released):
        report, took, stall = asyncio.run(scenario(ledger))

    assert report.compensated == [2, 1, 0] and undone == [2, 1, 0]
    assert took > HOLD_S * 0.8, "the rollback waited for the lock (else this proves nothing)"
    assert stall < MAX_STALL_S, f"the event loop stalled for {stall:.2f} s"

