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

from reversi.core.json_values import JSONView
from reversi.core.models import Event, EventType, Mode, NewEvent, RunRecord, Scope
from reversi.errors import KeepWrites
from reversi.store.base import Store
from reversi.store.factory import open_store
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


def event(actor: str, **data: JSONView) -> NewEvent:
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


def test_a_loops_write_never_runs_on_the_loop_not_even_a_lone_one(store: Store) -> None:
    """Every write of an event loop is written by the writer thread: the loop never waits for a commit."""
    where: list[int] = []

    def write(q: Queries) -> None:
        where.append(threading.get_ident())
        q.append(RUN_ID, [event("lone")])

    async def main() -> int:
        await store.arun_write(write)  # a lone write, nobody else writing
        await store.arun_write(write, "run_a")
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert len(where) == 2 and loop_thread not in where
    assert [actor for actor, _ in journal(store)] == ["lone"] * 2


def test_a_lone_loop_write_keeps_its_errors_and_refusals(store: Store) -> None:
    async def main() -> None:
        with pytest.raises(PermissionError, match="no"):
            await store.arun_write(refused)
        with pytest.raises(ValueError, match="undone"):
            await store.arun_write(failed)
        await store.arun_write(lambda q: q.append(RUN_ID, [event("fine")]))

    asyncio.run(main())
    assert [actor for actor, _ in journal(store)] == ["refused", "fine"]


def test_a_lone_write_never_waits_on_the_loop_for_another_process_writing(tmp_path: Path) -> None:
    """Another process holds SQLite's write lock: the writer thread waits for it, the loop keeps serving."""
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
            task = asyncio.ensure_future(store.arun_write(write))
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


def test_an_in_memory_store_takes_its_loops_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sqlite:///:memory:` is private to its one connection, which the writer thread uses as any thread does."""
    monkeypatch.chdir(tmp_path)  # where the run locks' folder would go
    with store_with_a_run("sqlite:///:memory:") as store:
        asyncio.run(store.arun_write(lambda q: q.append(RUN_ID, [event("in memory")])))
        assert [actor for actor, _ in journal(store)] == ["in memory"]
