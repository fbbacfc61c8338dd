"""Group commit: concurrent writers share transactions without losing or mixing up their writes."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from reversi.core.models import EventType, Mode, NewEvent, RunRecord, Scope
from reversi.store.base import open_store
from reversi.store.queries import Queries


def open_run(tmp_path: Path) -> tuple[object, str]:
    store = open_store(f"sqlite:///{tmp_path}/r.db")
    run = RunRecord("run_group", "local", Mode.OBSERVE, Scope(), {}, "2026-01-01T00:00:00.000000Z")
    with store.write() as q:
        q.insert_run(run)
    return store, run.run_id


def test_concurrent_writers_each_get_their_own_committed_event(tmp_path: Path) -> None:
    store, run_id = open_run(tmp_path)
    start = threading.Barrier(16)

    def writer(n: int) -> None:
        start.wait()
        for i in range(20):
            store.run_write(lambda q, i=i: q.append(run_id, [NewEvent(EventType.INTENDED, None, f"w{n}", {"i": i})]))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with store.read() as q:
        events = q.run_events(run_id)
    assert [e.seq for e in events] == list(range(16 * 20))
    assert sorted((e.actor, e.data["i"]) for e in events) == sorted((f"w{n}", i) for n in range(16) for i in range(20))


def test_a_failing_writer_undoes_only_its_own_writes(tmp_path: Path) -> None:
    store, run_id = open_run(tmp_path)

    def bad(q: Queries) -> None:
        q.append(run_id, [NewEvent(EventType.INTENDED, None, "bad", {})])
        raise ValueError("changed my mind")

    with pytest.raises(ValueError, match="changed my mind"):
        store.run_write(bad)
    assert store.run_write(lambda q: q.append(run_id, [NewEvent(EventType.INTENDED, None, "good", {})]))[0].seq == 0
    with store.read() as q:
        assert [e.actor for e in q.run_events(run_id)] == ["good"]
