"""The lease check a rollback makes in each journal write takes the run's lock in the same statement
(`check_lease(lock_run=True)`). A write that waited there for a claimant that took the run over must
still see the claim: it is refused (Fenced), and the holder knows it lost the run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

import reversi
from reversi.errors import Fenced

DEADLINE_S = 30.0


@pytest.fixture
def two(db_url: str) -> Iterator[tuple[reversi.Ledger, reversi.Ledger]]:
    """Two ledgers on one store, each with connections of its own (as two processes would have)."""
    with reversi.open(db_url) as holder, reversi.open(db_url) as claimant:
        yield holder, claimant


def _waiting_for_a_lock(db_url: str, pid: int) -> bool:
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted", (pid,)).fetchone()
    return bool(row and row[0])


def test_a_write_that_waited_on_the_run_while_it_was_taken_over_is_fenced(
    db_url: str, two: tuple[reversi.Ledger, reversi.Ledger]
) -> None:
    holder, claimant = two
    run = holder.start_run(actor="agent")
    lease = holder.store.lock_run(run.id, lease_s=60)
    claimed, commit = threading.Event(), threading.Event()
    pid: list[int] = []
    outcome: list[BaseException | None] = []

    def take_over() -> None:
        with claimant.store.write() as q:
            q.lock_run(run.id)
            assert q.take_lease(run.id, lease.token, lease.token + 1, "another:1", 60)
            claimed.set()
            assert commit.wait(DEADLINE_S)

    def write_as_holder() -> None:
        try:
            with holder.store.write() as q:
                if db_url.startswith("postgresql"):
                    pid.append(int(q.execute("SELECT pg_backend_pid()").fetchone()[0]))
                lease.check(q, lock_run=True)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    claimer = threading.Thread(target=take_over)
    claimer.start()
    assert claimed.wait(DEADLINE_S)
    writer = threading.Thread(target=write_as_holder)
    writer.start()
    if db_url.startswith("postgresql"):  # let the claim commit only once the holder waits on the run's lock
        deadline = time.monotonic() + DEADLINE_S
        while not (pid and _waiting_for_a_lock(db_url, pid[0])):
            assert time.monotonic() < deadline, "the holder's write never waited for the run's lock"
            time.sleep(0.01)
    commit.set()
    claimer.join(DEADLINE_S)
    writer.join(DEADLINE_S)
    assert len(outcome) == 1 and isinstance(outcome[0], Fenced), outcome
    with pytest.raises(Fenced):
        lease.ensure()  # the holder knows: nothing more is called
    lease.release()


def test_the_holder_s_own_lease_passes_the_check_that_locks_the_run(db_url: str) -> None:
    with reversi.open(db_url) as ledger:
        run = ledger.start_run(actor="agent")
        with ledger.store.lock_run(run.id, lease_s=60) as lease:
            with ledger.store.write() as q:
                lease.check(q, lock_run=True)
            with lease.fenced() as q:
                assert q.lease(run.id) is not None
