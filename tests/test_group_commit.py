"""Group commit: concurrent writers, threads and event loops alike, share transactions without losing
or mixing up their writes."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reversi.core.models import Event, EventType, Mode, NewEvent, RunRecord, Scope
from reversi.store.base import Store
from reversi.store.factory import open_store
from reversi.store.group_commit import KeepWrites
from reversi.store.queries import Queries
from reversi.store.sqlite import SQLiteStore

RUN_ID = "run_group"


@contextmanager
def store_with_a_run(url: str) -> Iterator[Store]:
    store = open_store(url)
    run = RunRecord(RUN_ID, "local", Mode.OBSERVE, Scope(), {}, "2026-01-01T00:00:00.000000Z")
    with store.write() as q:
        q.insert_run(run)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with store_with_a_run(db_url) as store:
        yield store


def event(actor: str, **data: object) -> NewEvent:
    return NewEvent(EventType.INTENDED, None, actor, data)


def append_one(actor: str, i: int, q: Queries) -> list[Event]:
    return q.append(RUN_ID, [event(actor, i=i)])


def journal(store: Store) -> list[tuple[str, dict[str, object]]]:
    with store.read() as q:
        events = q.run_events(RUN_ID)
    assert [e.seq for e in events] == list(range(len(events)))  # numbered without gaps or repeats
    return [(e.actor, dict(e.data)) for e in events]


def refused(q: Queries) -> None:
    """A refusal: its event lands, and its caller still hears no."""
    q.append(RUN_ID, [event("refused")])
    raise KeepWrites(PermissionError("no"))


def failed(q: Queries) -> None:
    """A write that fails: its event is undone."""
    q.append(RUN_ID, [event("failed")])
    raise ValueError("undone")


def test_concurrent_writers_each_get_their_own_committed_event(store: Store) -> None:
    start = threading.Barrier(16)

    def writer(n: int) -> None:
        start.wait()
        for i in range(20):
            store.run_write(functools.partial(append_one, f"w{n}", i))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(journal(store), key=str) == sorted(((f"w{n}", {"i": i}) for n in range(16) for i in range(20)),
                                                      key=str)


def test_event_loop_writers_and_threads_share_the_commits(store: Store) -> None:
    """Coroutines wait on futures (the loop never blocks), threads on events; all their writes land."""

    def thread_writer(n: int) -> None:
        for i in range(10):
            store.run_write(functools.partial(append_one, f"t{n}", i))

    async def main() -> list[int]:
        async def writer(n: int) -> list[int]:
            return [(await store.arun_write(functools.partial(append_one, f"a{n}", i)))[0].seq for i in range(10)]

        threads = [threading.Thread(target=thread_writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        seqs = [seq for found in await asyncio.gather(*(writer(n) for n in range(24))) for seq in found]
        for t in threads:
            await asyncio.to_thread(t.join)
        return seqs

    seqs = asyncio.run(main())
    written = journal(store)
    assert len(written) == 24 * 10 + 4 * 10
    assert len(set(seqs)) == len(seqs)  # each coroutine got its own event back
    assert {(a, d["i"]) for a, d in written} == {(f"a{n}", i) for n in range(24) for i in range(10)} | {
        (f"t{n}", i) for n in range(4) for i in range(10)
    }


def test_a_failing_writer_undoes_only_its_own_writes(store: Store) -> None:
    def bad(q: Queries) -> None:
        q.append(RUN_ID, [event("bad")])
        raise ValueError("changed my mind")

    with pytest.raises(ValueError, match="changed my mind"):
        store.run_write(bad)
    assert store.run_write(lambda q: q.append(RUN_ID, [event("good")]))[0].seq == 0
    assert journal(store) == [("good", {})]


def test_keep_writes_commits_and_still_raises_alone_and_in_a_shared_batch(store: Store) -> None:
    with pytest.raises(PermissionError, match="no"):
        store.run_write(refused)

    async def batch() -> list[object]:  # submitted together, so most share one transaction
        writes = [refused, failed, lambda q: q.append(RUN_ID, [event("fine")])] * 5
        return list(await asyncio.gather(*(store.arun_write(w) for w in writes), return_exceptions=True))

    outcomes = asyncio.run(batch())
    assert [type(o).__name__ for o in outcomes[:3]] == ["PermissionError", "ValueError", "list"]
    assert [actor for actor, _ in journal(store)] == ["refused"] + ["refused", "fine"] * 5


def test_a_shared_batch_writes_in_the_order_of_what_its_writes_lock(store: Store) -> None:
    """Every batch takes its runs' locks in one order, so two processes' batches cannot deadlock."""
    written: list[tuple[Queries, str]] = []  # the transaction (kept alive, so each is told apart) and the write

    def write(name: str) -> object:
        def fn(q: Queries) -> None:
            written.append((q, name))
            q.append(RUN_ID, [event(name)])
        return fn

    async def batch() -> None:  # queued together: shared transactions
        names = ["run_c", "run_a", None, "run_b"] * 4
        await asyncio.gather(*(store.arun_write(write(str(n)), order=n) for n in names))  # type: ignore[arg-type]

    asyncio.run(batch())
    batches: dict[int, list[str]] = {}
    for q, name in written:
        batches.setdefault(id(q), []).append(name)
    assert sum(map(len, batches.values())) == 16 and max(map(len, batches.values())) > 1
    for names in batches.values():
        assert names == sorted(names, key=lambda n: (n == "None", n))


def test_a_coroutine_cancelled_while_waiting_still_gets_its_write_committed(store: Store) -> None:
    started = threading.Event()
    release = threading.Event()

    def slow(q: Queries) -> None:
        started.set()
        release.wait(10)
        q.append(RUN_ID, [event("slow")])

    async def main() -> None:
        task = asyncio.ensure_future(store.arun_write(slow))
        await asyncio.to_thread(started.wait, 10)
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the next write queues behind it and proves the first one was committed, not dropped
        await store.arun_write(lambda q: q.append(RUN_ID, [event("after")]))

    asyncio.run(main())
    assert [actor for actor, _ in journal(store)] == ["slow", "after"]


def test_a_write_nobody_could_share_runs_on_the_loop_itself(store: Store) -> None:
    """With `only_request` saying so and no batch in progress, the write skips the helper thread, on SQLite;
    PostgreSQL writes are round trips over the network, which a loop must not wait for."""
    where: list[int] = []

    def write(q: Queries) -> None:
        where.append(threading.get_ident())
        q.append(RUN_ID, [event("inline")])

    async def main() -> None:
        await store.arun_write(write, only_request=lambda: True)
        await store.arun_write(write, only_request=lambda: False)
        await store.arun_write(write)

    asyncio.run(main())
    loop_thread = threading.get_ident()
    assert (where[0] == loop_thread) is isinstance(store, SQLiteStore)
    assert where[1] != loop_thread and where[2] != loop_thread
    assert [actor for actor, _ in journal(store)] == ["inline"] * 3


def test_inline_writes_keep_their_errors_and_refusals(store: Store) -> None:
    async def main() -> None:
        with pytest.raises(PermissionError, match="no"):
            await store.arun_write(refused, only_request=lambda: True)
        with pytest.raises(ValueError, match="undone"):
            await store.arun_write(failed, only_request=lambda: True)
        await store.arun_write(lambda q: q.append(RUN_ID, [event("fine")]), only_request=lambda: True)

    asyncio.run(main())
    assert [actor for actor, _ in journal(store)] == ["refused", "fine"]


def test_requests_that_arrive_together_are_not_written_one_by_one_on_the_loop(store: Store) -> None:
    """`only_request` is asked after the loop has run the other ready tasks, so a burst sees itself and
    goes through the group commit, sharing transactions, instead of blocking the loop in turn."""
    in_flight = 0
    where: list[int] = []

    async def request(n: int) -> None:
        nonlocal in_flight
        in_flight += 1
        try:
            def write(q: Queries) -> None:
                where.append(threading.get_ident())
                q.append(RUN_ID, [event(f"r{n}")])

            await store.arun_write(write, only_request=lambda: in_flight <= 1)
        finally:
            in_flight -= 1

    async def main() -> None:
        await asyncio.gather(*(request(n) for n in range(8)))

    asyncio.run(main())
    assert threading.get_ident() not in where
    assert sorted(actor for actor, _ in journal(store)) == sorted(f"r{n}" for n in range(8))


def test_an_inline_write_waits_for_a_batch_in_progress_instead_of_running_beside_it(store: Store) -> None:
    started, release = threading.Event(), threading.Event()
    where: list[int] = []

    def slow(q: Queries) -> None:
        started.set()
        release.wait(10)
        q.append(RUN_ID, [event("slow")])

    def write(q: Queries) -> None:
        where.append(threading.get_ident())
        q.append(RUN_ID, [event("next")])

    async def main() -> None:
        first = asyncio.ensure_future(store.arun_write(slow))
        await asyncio.to_thread(started.wait, 10)
        second = asyncio.ensure_future(store.arun_write(write, only_request=lambda: True))
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.gather(first, second)

    asyncio.run(main())
    assert where and where[0] != threading.get_ident()  # queued behind the batch, written by the helper
    assert [actor for actor, _ in journal(store)] == ["slow", "next"]


def test_a_lone_write_never_waits_on_the_loop_for_another_process_writing(tmp_path: Path) -> None:
    """Another process holds SQLite's write lock: the loop hands the write over and keeps serving.
    (SQLite only: it is the one store whose writes may run on the loop.)"""
    where: list[int] = []

    def write(q: Queries) -> None:
        where.append(threading.get_ident())
        q.append(RUN_ID, [event("waited")])

    with store_with_a_run(f"sqlite:///{tmp_path}/reversi.db") as store:
        assert isinstance(store, SQLiteStore)
        other = sqlite3.connect(store.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # as another process would: the file's write lock, held

        async def main() -> int:
            ticks = 0
            task = asyncio.ensure_future(store.arun_write(write, only_request=lambda: True))
            while ticks < 20:  # the loop keeps running while the write waits for the lock
                await asyncio.sleep(0.01)
                ticks += 1
            assert not task.done()
            other.execute("COMMIT")
            await task
            return ticks

        assert asyncio.run(main()) == 20
        other.close()
        assert where and where[0] != threading.get_ident()
        assert [actor for actor, _ in journal(store)] == ["waited"]


def test_a_lone_write_runs_on_the_loop_while_another_thread_reads(tmp_path: Path) -> None:
    """The write that must not wait has a SQLite connection of its own: a long read by another thread
    of the process (a console page, a rollback job) does not send it to the queue."""
    where: list[int] = []

    def write(q: Queries) -> None:
        where.append(threading.get_ident())
        q.append(RUN_ID, [event("beside a reader")])

    with store_with_a_run(f"sqlite:///{tmp_path}/reversi.db") as store:
        reading, done = threading.Event(), threading.Event()

        def reader() -> None:
            with store.read() as q:
                q.run_events(RUN_ID)
                reading.set()
                done.wait(10)

        thread = threading.Thread(target=reader)
        thread.start()
        try:
            assert reading.wait(10)
            asyncio.run(store.arun_write(write, only_request=lambda: True))
        finally:
            done.set()
            thread.join(10)
        assert where == [threading.get_ident()]
        assert [actor for actor, _ in journal(store)] == ["beside a reader"]


def test_an_in_memory_store_queues_its_loops_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sqlite:///:memory:` is private to one connection, so it has no second one to write on only_request."""
    monkeypatch.chdir(tmp_path)  # where the run locks' folder would go
    with store_with_a_run("sqlite:///:memory:") as store:
        asyncio.run(store.arun_write(lambda q: q.append(RUN_ID, [event("in memory")]), only_request=lambda: True))
        assert [actor for actor, _ in journal(store)] == ["in memory"]
