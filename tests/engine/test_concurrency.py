"""Many writers at once, in threads and in processes: no step number lost or given twice."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

import reversi

WAIT_S = 30.0

Spawn = Callable[..., Any]


def assert_consistent(run: reversi.Run, expected_steps: int) -> None:
    """Steps 0..n-1, each journaled `intended` exactly once, and seq without gaps."""
    steps = run.steps()
    assert [s.index for s in steps] == list(range(expected_steps))
    events = run.events()
    assert [e.seq for e in events] == list(range(len(events)))
    intended = [e.step for e in events if e.type == "intended" and e.step is not None]
    assert sorted(intended) == list(range(expected_steps))
    assert all(s.status.value == "succeeded" for s in steps)


def test_threads_recording_into_one_run_get_distinct_step_numbers(db_url: str, manifest: Path) -> None:
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger, reversi.open(db_url) as other:
        run = ledger.start_run()
        same_run_elsewhere = other.start_run(run.id)
        got: list[int] = []
        errors: list[BaseException] = []
        start = threading.Barrier(8)

        def record(target: reversi.Run, worker: int) -> None:
            try:
                start.wait()
                for i in range(10):
                    handle = target.begin("jobs.start", {"worker": worker, "i": i})
                    got.append(handle.index)
                    handle.succeeded({"id": f"{worker}-{i}"})
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=record, args=(run if w % 2 else same_run_elsewhere, w)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        assert errors == []
        assert sorted(got) == list(range(80))
        assert_consistent(run, 80)
        args = {(s.args["worker"], s.args["i"]) for s in run.steps()}
        assert len(args) == 80, "every call landed on its own step"


def test_processes_recording_into_one_run_get_distinct_step_numbers(
    ledger: reversi.Ledger, manifest: Path, spawn: Spawn
) -> None:
    run = ledger.start_run(run_id="run_shared")
    children = [
        spawn("record-many", manifest=str(manifest), run_id=run.id, count=15, tool="jobs.start") for _ in range(3)
    ]
    for child in children:
        child.expect("ready")
    for child in children:
        child.send("go")
    mine = [run.begin("jobs.start", {"parent": i}) for i in range(5)]
    for handle in mine:
        handle.succeeded({"id": "p"})

    got = [h.index for h in mine]
    for child in children:
        while (line := child.line()) != "done":
            assert line is not None and line.startswith("step "), child.said
            got.append(int(line.split()[1]))

    assert sorted(got) == list(range(50))
    assert_consistent(run, 50)


@contextmanager
def inserts_held_back(db_url: str, run_id: str, waiters: int) -> Iterator[Callable[[], None]]:
    """Hold back every writer that would create `run_id` until the returned function is called.

    PostgreSQL: an uncommitted row with that id makes the first INSERT of it wait on this
    transaction, after it has already looked for the run and not found it, and the other openers
    queue behind that one's lock on the id; the function waits until `waiters` sessions are blocked
    so, then rolls back. SQLite: an open write transaction, which
    every writer waits for (BEGIN IMMEDIATE) before it looks.
    """
    if db_url.startswith("sqlite:///"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")

        def release() -> None:
            conn.execute("ROLLBACK")

        yield release
        conn.close()
        return
    with psycopg.connect(db_url) as pg:
        pg.execute(
            "INSERT INTO runs (run_id, principal, mode, actor, tenant, environment, labels, created_at) "
            "VALUES (%s, 'nobody', 'observe', '', '', '', '{}', '')",
            (run_id,),
        )

        def release() -> None:
            with psycopg.connect(db_url, autocommit=True) as watcher:
                deadline = time.monotonic() + WAIT_S
                while time.monotonic() < deadline:
                    row = watcher.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND wait_event_type = 'Lock' "
                        "AND (query LIKE 'INSERT INTO runs%%' OR query LIKE 'SELECT pg_advisory_xact_lock%%')"
                    ).fetchone()
                    if row and row[0] >= waiters:
                        break
                    time.sleep(0.01)  # polling what the server reports, not guessing a duration
                else:
                    pytest.fail(f"{waiters} writers never queued behind the held-back insert")
            pg.rollback()

        yield release


def test_processes_opening_the_same_new_run_id_at_once_open_it_once(
    ledger: reversi.Ledger, db_url: str, spawn: Spawn
) -> None:
    children = [spawn("start-run", run_id="run_raced") for _ in range(4)]
    for child in children:
        child.expect("ready")
    with inserts_held_back(db_url, "run_raced", waiters=4) as release:
        for child in children:
            child.send("go")
        release()

    answers = [child.line() for child in children]

    assert answers == ["ok run_raced"] * 4, [c.said for c in children]
    types = [e.type for e in ledger.get_run("run_raced").events()]
    assert sorted(types) == ["run_continued"] * 3 + ["run_opened"]
    assert types[0] == "run_opened"


def test_processes_racing_for_one_duplicate_key_let_exactly_one_call_through(
    ledger: reversi.Ledger, manifest: Path, spawn: Spawn
) -> None:
    runs = [ledger.start_run(tenant="acme").id for _ in range(4)]
    children = [
        spawn("begin", manifest=str(manifest), run_id=r, tool="shop.place_order", args={"order_id": "o_1"})
        for r in runs
    ]
    for child in children:
        child.expect("ready")
    for child in children:
        child.send("go")

    answers = sorted(str(child.line()) for child in children)

    assert answers[-1] == "step 0", answers
    assert all(a.startswith("error duplicate duplicate call: step 0 of run_") for a in answers[:-1]), answers
    standing = [r for r in runs if ledger.get_run(r).steps()]
    assert len(standing) == 1


def test_processes_asking_for_the_same_approval_at_once_share_one_request(
    ledger: reversi.Ledger, manifest: Path, spawn: Spawn
) -> None:
    run = ledger.start_run()
    children = [
        spawn("begin", manifest=str(manifest), run_id=run.id, tool="payments.wire", args={"amount": 5})
        for _ in range(3)
    ]
    for child in children:
        child.expect("ready")
    for child in children:
        child.send("go")

    answers = {str(child.line()) for child in children}

    [approval] = ledger.approvals()
    assert answers == {f"error approval_required approval required: {approval.approval_id}"}
