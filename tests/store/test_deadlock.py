"""Two writers that lock the same runs in opposite orders: the database breaks the cycle, and the
write it undid runs again, so both land."""

from __future__ import annotations

import threading

import pytest

from reversi.core.models import EventType, Mode, NewEvent, RunRecord, Scope
from reversi.store.factory import open_store
from reversi.store.queries import Queries

WAIT_S = 30


# SQLite serialises every writer of the file (BEGIN IMMEDIATE): its writers cannot form a lock cycle.
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_writers_locking_runs_in_opposite_orders_both_land(db_url: str) -> None:
    first, second = open_store(db_url), open_store(db_url)
    with first.write() as q:
        for run_id in ("run_a", "run_b"):
            q.insert_run(RunRecord(run_id, "local", Mode.OBSERVE, Scope(), {}, "2026-01-01T00:00:00.000000Z"))
    both_hold_one = threading.Barrier(2, timeout=WAIT_S)
    attempts = {"one": 0, "two": 0}

    def writer(name: str, order: tuple[str, str]) -> object:
        def fn(q: Queries) -> None:
            attempts[name] += 1
            q.lock_run(order[0])
            if attempts[name] == 1:
                both_hold_one.wait()  # each holds its first run; now each asks for the other's
            q.lock_run(order[1])
            for run_id in order:
                q.append(run_id, [NewEvent(EventType.RUN_CONTINUED, None, name, {})])

        return fn

    errors: list[BaseException] = []

    def run(store: object, name: str, order: tuple[str, str]) -> None:
        try:
            store.run_write(writer(name, order))  # type: ignore[attr-defined]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(first, "one", ("run_a", "run_b"))),
               threading.Thread(target=run, args=(second, "two", ("run_b", "run_a")))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    try:
        assert errors == []
        # At least one side was undone and ran again (a retry can meet the other side once more).
        assert max(attempts.values()) >= 2, attempts
        with first.read() as q:
            for run_id in ("run_a", "run_b"):
                assert sorted(e.actor for e in q.run_events(run_id)) == ["one", "two"]
    finally:
        first.close()
        second.close()
